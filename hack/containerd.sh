#!/usr/bin/env bash
# Usage: containerd.sh start DIR [--cri [--systemd-cgroup] [--no-pivot]] [--shim-dir PATHDIR] [--containerd BIN] [--systemd-unit] | stop DIR | kill DIR | restart DIR | systemctl-restart DIR
# Run a private containerd (the one on PATH, or BIN) rooted at DIR; it never touches the system
# containerd. Its config is in the format of its version: `version = 2` for containerd 1.x,
# `version = 3` for 2.x (2.3+ still reads 3), where the CRI plugin is split in three.
# --systemd-cgroup: `SystemdCgroup = true` in both CRI handlers' options, as on a node whose
# kubelet uses the systemd cgroup driver. --no-pivot: `NoPivotRoot = true` in every handler's
# options (runc's --no-pivot). A 2.x containerd with --shim-dir gets a third handler,
# rustpod-runc-v2 (see runc_typed_rustpod_toml). $RUSTPOD_CRI_CRUN adds handler `crun` (crun_toml).
# --containerd BIN: that containerd instead (its own ctr and containerd-shim-runc-v2 beside it
# are used: put the latter on PATHDIR).
# --systemd-unit: run it as a systemd service (where systemd is PID 1), KillMode=process and
# Delegate=yes as the packaged containerd.service, so that `systemctl-restart` restarts it the
# way a node's admin does: its shims live on in the unit's cgroup.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: containerd.sh start DIR [--cri [--systemd-cgroup] [--no-pivot]] [--shim-dir PATHDIR] [--containerd BIN] [--systemd-unit] | stop DIR | kill DIR | restart DIR | systemctl-restart DIR"
(($# >= 2)) || die "$usage"
action=$1 dir=$(abspath "$2")
shift 2
cri= shimdir= systemd_cgroup=false no_pivot= containerd= systemd_unit=
if [[ $action == start ]]; then
	while (($#)); do
		case $1 in
		--cri) cri=1 ;;
		--systemd-cgroup) systemd_cgroup=true ;;
		--no-pivot) no_pivot='NoPivotRoot = true' ;;
		--shim-dir) (($# >= 2)) || die "$usage"; shimdir=$(abspath "$2"); shift ;;
		--containerd) (($# >= 2)) || die "$usage"; containerd=$(abspath "$2"); shift ;;
		--systemd-unit) systemd_unit=1 ;;
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
((${#sock} + 6 < 108)) || die "socket path too long (unix sockets allow 107 bytes): $sock.ttrpc"

# running: print the PID of the containerd that owns DIR, if any (guards against PID reuse).
running() {
	local pid
	pid=$(cat "$pidfile" 2>/dev/null) || return 1
	alive "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config $conf " || return 1
	echo "$pid"
}

# containerd_major: the major version of the containerd we run ("… containerd/v2 2.1.9~ds1 …"
# gives 2, Debian 12's "… 1.6.20~ds1 …" 1).
containerd_major() {
	"$containerd" --version | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^v?[0-9]+\./) {sub(/^v/, "", $i); split($i, v, "."); print v[1]; exit}}'
}

# runtimes_toml TABLE: both CRI handlers, under the table the version puts them in.
runtimes_toml() {
	cat <<-TOML
		  [$1.containerd]
		    default_runtime_name = "runc"
		    [$1.containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [$1.containerd.runtimes.runc.options]
		        SystemdCgroup = $systemd_cgroup
		        $no_pivot
		    [$1.containerd.runtimes.rustpod]
		      runtime_type = "io.containerd.rustpod.v1"
		      [$1.containerd.runtimes.rustpod.options]
		        $(rustpod_options)
	TOML
	runc_typed_rustpod_toml "$1"
	crun_toml "$1"
}

# rustpod_options: the rustpod handler's options. containerd 1.x decodes the table of a runtime
# type not named runc's into runtimeoptions.v1.Options, whose keys are TypeUrl, ConfigPath and
# ConfigBody: SystemdCgroup or NoPivotRoot there never reach the shim (it gets an empty message).
# So 1.x names a file of them by ConfigPath; 2.x sends the table itself as TOML in ConfigBody.
rustpod_options() {
	local options="SystemdCgroup = $systemd_cgroup"$'\n'"$no_pivot"
	if [[ $cri_version == 2 ]]; then
		printf '%s\n' "$options" >"$dir/rustpod-options.toml"
		echo "ConfigPath = \"$dir/rustpod-options.toml\""
	else
		echo "$options"
	fi
}

# crun_toml TABLE: with $RUSTPOD_CRI_CRUN (a crun binary; the sid guest sets /usr/bin/crun),
# handler `crun`: containerd's runc shim driving crun, a second reference for
# Cri::same_on_each_handler.
crun_toml() {
	[[ ${RUSTPOD_CRI_CRUN:-} ]] || return 0
	[[ -x $RUSTPOD_CRI_CRUN ]] || die "RUSTPOD_CRI_CRUN=$RUSTPOD_CRI_CRUN is not an executable"
	cat <<-TOML
		    [$1.containerd.runtimes.crun]
		      runtime_type = "io.containerd.runc.v2"
		      [$1.containerd.runtimes.crun.options]
		        BinaryName = "$RUSTPOD_CRI_CRUN"
		        SystemdCgroup = $systemd_cgroup
		        $no_pivot
	TOML
}

# runc_typed_rustpod_toml TABLE: on 2.x, handler `rustpod-runc-v2`: our shim under runc's
# runtime type, the one type containerd 2.1 and 2.2 ask `-info` of (so the one whose CRI
# Status can say user_namespaces); runtime_path makes containerd run our shim for it.
runc_typed_rustpod_toml() {
	[[ $cri_version == 3 && $shimdir ]] || return 0
	cat <<-TOML
		    [$1.containerd.runtimes.rustpod-runc-v2]
		      runtime_type = "io.containerd.runc.v2"
		      runtime_path = "$shimdir/containerd-shim-rustpod-v1"
		      [$1.containerd.runtimes.rustpod-runc-v2.options]
		        SystemdCgroup = $systemd_cgroup
		        $no_pivot
	TOML
}

# cri_toml_v2: containerd 1.x, one CRI plugin.
cri_toml_v2() {
	local cri='plugins."io.containerd.grpc.v1.cri"'
	cat <<-TOML

		[$cri]
		  sandbox_image = "registry.k8s.io/pause:3.9"
		  restrict_oom_score_adj = true
		  enable_unprivileged_ports = false
		  enable_unprivileged_icmp = false
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  [$cri.cni]
		    bin_dir = "$dir/cni/bin"
		    conf_dir = "$dir/cni/net.d"
	TOML
	runtimes_toml "$cri"
}

# cri_toml_v3: containerd 2.x, where CRI is the server, the images and the runtime plugins.
cri_toml_v3() {
	local runtime="plugins.'io.containerd.cri.v1.runtime'"
	cat <<-TOML

		[plugins.'io.containerd.grpc.v1.cri']
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		[plugins.'io.containerd.cri.v1.images'.pinned_images]
		  sandbox = "registry.k8s.io/pause:3.9"
		[$runtime]
		  restrict_oom_score_adj = true
		  enable_unprivileged_ports = false
		  enable_unprivileged_icmp = false
		  [$runtime.cni]
		    bin_dirs = ["$dir/cni/bin"]
		    conf_dir = "$dir/cni/net.d"
	TOML
	runtimes_toml "$runtime"
}

write_config() {
	local version=2 opt='"io.containerd.internal.v1.opt"'
	local plugins='disabled_plugins = ["io.containerd.grpc.v1.cri"]'
	if (($(containerd_major) >= 2)); then
		version=3 opt="'io.containerd.internal.v1.opt'"
		plugins='disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"]'
	fi
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

			[plugins.$opt]
			  path = "$dir/opt"
		TOML
		# containerd 2.x starts NRI on the one /var/run/nri/nri.sock: a second private
		# containerd would fail to bind it, and no test uses NRI.
		((version < 3)) || printf "\n[plugins.'io.containerd.nri.v1.nri']\n  disable = true\n"
		if [[ $cri ]]; then cri_version=$version "cri_toml_v$version"; fi
	} >"$conf.tmp"
	mv -f "$conf.tmp" "$conf"
}

# unit: the systemd service this DIR's containerd runs as, if it was started with --systemd-unit.
unit() {
	cat "$dir/systemd-unit" 2>/dev/null
}

# write_unit UNIT PATH: a runtime unit running containerd with the pid file written as launch's.
write_unit() {
	printf '#!/bin/bash\necho $$ >%q.tmp && mv %q.tmp %q && exec %q --config %q\n' \
		"$pidfile" "$pidfile" "$pidfile" "$containerd" "$conf" >"$dir/containerd-unit.sh"
	cat >"/run/systemd/system/$1.tmp" <<-UNIT
		[Unit]
		Description=rustpod test containerd in $dir
		[Service]
		Environment=PATH=$2
		ExecStart=/bin/bash $dir/containerd-unit.sh
		KillMode=process
		Delegate=yes
		StandardOutput=append:$log
		StandardError=append:$log
	UNIT
	mv -f "/run/systemd/system/$1.tmp" "/run/systemd/system/$1"
	systemctl daemon-reload
}

launch() {
	[[ -f $conf ]] || die "no $conf: use start first"
	running >/dev/null && return 0
	local path=$PATH unit
	[[ -f $dir/shim-dir ]] && path=$(cat "$dir/shim-dir"):$path
	rm -f "$pidfile" "$sock" "$sock.ttrpc"
	if unit=$(unit); then
		[[ -f /run/systemd/system/$unit ]] || write_unit "$unit" "$path"
		systemctl reset-failed "$unit" 2>/dev/null || true
		systemctl start "$unit" || die "systemctl start $unit failed (log: $log)"
	else
		# The child writes its own PID and then execs containerd, so the PID is right even if setsid forks.
		# No nohup: setsid already detaches, and an ignored SIGHUP would be inherited by shims and containers.
		PATH=$path setsid bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' \
			_ "$pidfile" "$containerd" --config "$conf" </dev/null >>"$log" 2>&1 &
	fi
	await_answer
}

# await_answer: until the containerd of the pid file answers on its socket (20 s at most).
await_answer() {
	local pid i
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
	if [[ $systemd_unit ]]; then
		[[ -d /run/systemd/system ]] || die "--systemd-unit: systemd is not PID 1 here (no /run/systemd/system)"
		echo "rustpod-containerd-$(basename "$dir" | tr -c 'A-Za-z0-9\n' '-').service" >"$dir/systemd-unit"
	else
		rm -f "$dir/systemd-unit"
	fi
	echo "$containerd" >"$dir/containerd-bin"
	launch
	;;
restart)
	signal_and_wait TERM 10 || signal_and_wait KILL 5 || die "containerd would not die"
	launch
	;;
systemctl-restart)
	unit=$(unit) || die "$dir's containerd is not a systemd unit (start it with --systemd-unit)"
	old=$(running) || die "$dir's containerd is not running"
	# The new containerd writes them again; await_answer waits for that.
	rm -f "$pidfile" "$sock" "$sock.ttrpc"
	systemctl restart "$unit" || die "systemctl restart $unit failed (log: $log)"
	wait_dead "$old" 10 || die "systemctl restart $unit left containerd $old running"
	await_answer
	;;
stop)
	signal_and_wait TERM 10 || signal_and_wait KILL 5 || die "containerd would not die"
	rm -f "$pidfile"
	if unit=$(unit); then
		systemctl stop "$unit" 2>/dev/null || true
		rm -f "/run/systemd/system/$unit"
		systemctl daemon-reload
	fi
	;;
kill)
	signal_and_wait KILL 5 || die "containerd would not die"
	;;
*) die "$usage" ;;
esac

// Pods in user namespaces (kubelet's `hostUsers: false`: userns_options mode POD, one mapping of
// 65536 ids for uids and gids on the sandbox and every container) through containerd 2.x's CRI
// (`RUSTPOD_CRI_CONTAINERD`, else `RUSTPOD_CONTAINERD`), for runc and for our shim, with the same
// checks: the mapping inside, root owning its rootfs, a root-only host file unreadable, a
// volume dir owned by the pod's root, ExecSync and logs, one user namespace for the pod.
//
// Our shim runs under two handlers: `rustpod-runc-v2` (runtime_type io.containerd.runc.v2 with
// runtime_path our shim: the one whose Status says user_namespaces on containerd 2.1, see
// README "User-namespaced pods") and `rustpod` (io.containerd.rustpod.v1: containerd runs the
// pod too, kubelet would refuse it on 2.1 for the missing feature).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustpod_cri_tests::cri::{self, RuntimeHandler};
use rustpod_cri_tests::{
    blocker_on, containerd2, pod_config, pod_security, security, set_container_namespaces, set_pod_userns, sleeper, userns_pod, Cri,
};
use rustpod_tests::{env, process, skip, skip_if, wait};

/// The handler that carries our shim under runc's runtime type (hack/containerd.sh).
const RUNC_TYPED: &str = "rustpod-runc-v2";

/// A containerd 2.x CRI, or why not.
fn containerd2_cri() -> Result<Cri, String> {
    let containerd =
        containerd2().ok_or("neither RUSTPOD_CRI_CONTAINERD nor RUSTPOD_CONTAINERD is set (containerd 2.x; hack/test.sh sets sid's)")?;
    if let Some(why) = blocker_on(Some(&containerd)) {
        return Err(why);
    }
    if !runtime_can_idmap(&env::rustpod_bin()) {
        return Err(format!("{} features: no idmapped mounts on this kernel", env::rustpod_bin().display()));
    }
    let cri = Cri::start_on(Some(&containerd));
    cri.enable_pod_network();
    Ok(cri)
}

/// `containerd2_cri()`, or skip the test with why not.
macro_rules! containerd2_cri_or_skip {
    () => {
        match containerd2_cri() {
            Ok(cri) => cri,
            Err(why) => skip!("{why}"),
        }
    };
}

/// Whether an OCI runtime's `features` claims idmapped mounts.
fn runtime_can_idmap(bin: &Path) -> bool {
    let features = process::run(bin, &["features"], b"");
    features.success() && features.stdout_json()["linux"]["mountExtensions"]["idmap"]["enabled"] == true
}

fn handler<'a>(handlers: &'a [RuntimeHandler], name: &str) -> &'a RuntimeHandler {
    handlers.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no handler {name:?} in {handlers:#?}"))
}

/// A host id range no other test of this run uses (65536-aligned, under 2^31).
fn host_base(slot: u32) -> u32 {
    65536 * (1000 + (std::process::id() % 4000) * 4 + slot)
}

/// Host-side volumes as kubelet lays them out: a hostPath dir holding a root-owned 0600 file,
/// and an emptyDir-like dir owned by the pod's root (`base` on the host), mode 0750.
struct Volumes {
    secret_dir: PathBuf,
    empty_dir: PathBuf,
}

fn volumes(cri: &Cri, name: &str, base: u32) -> Volumes {
    let dir = cri.dir().join("volumes").join(name);
    let secret_dir = dir.join("hostpath");
    let empty_dir = dir.join("empty-dir");
    for d in [&secret_dir, &empty_dir] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
    }
    std::fs::write(secret_dir.join("secret"), "host-secret").expect("write the secret");
    std::fs::set_permissions(secret_dir.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&empty_dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::chown(&empty_dir, Some(base), Some(base)).expect("chown the emptyDir-like dir");
    Volumes { secret_dir, empty_dir }
}

fn bind(host: &Path, container_path: &str) -> cri::Mount {
    cri::Mount { container_path: container_path.into(), host_path: host.to_str().expect("UTF-8").into(), ..Default::default() }
}

fn ns_of(pid: i32, ns: &str) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap_or_else(|e| panic!("readlink /proc/{pid}/ns/{ns}: {e}"))
}

/// The `Uid:` line of /proc/PID/status: real, effective, saved, fs.
fn host_uids(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status.lines().find_map(|l| l.strip_prefix("Uid:")).expect("a Uid line").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// kubelet's `hostUsers: false` pod with `userns`, each container in its own PID namespace
/// (kubelet's default without shareProcessNamespace).
fn as_userns_pod(pod: &mut cri::PodSandboxConfig, userns: cri::UserNamespace) {
    set_pod_userns(pod, &userns);
    pod_security(pod).namespace_options.as_mut().expect("namespace options").pid = cri::NamespaceMode::Container as i32;
}

fn userns_pod_config(name: &str, userns: cri::UserNamespace) -> cri::PodSandboxConfig {
    let mut pod = pod_config(name);
    as_userns_pod(&mut pod, userns);
    pod
}

/// Runs the pod on `handler` and checks it from inside and from the host.
fn check_userns_pod(cri: &Cri, handler: &str, base: u32) {
    let vols = volumes(cri, handler, base);
    let (mut pod_cfg, log_dir) = cri.pod_with_logs(&format!("userns-{handler}"), "app");
    as_userns_pod(&mut pod_cfg, userns_pod(base));
    let pod = cri.run_pod_with(&pod_cfg, handler).unwrap_or_else(|e| panic!("RunPodSandbox with userns (handler {handler}): {e}"));
    let mut app = sleeper("app");
    // /dev/stdout reopens the stdio pipe through /proc/self/fd: the pipes must be the pod
    // root's (runc's IoUid/IoGid), as nginx-like images log that way.
    app.command = vec!["sh".into(), "-c".into(), "echo userns-log-line; echo reopened > /dev/stdout; exec sleep 100000".into()];
    app.log_path = "app/0.log".into();
    app.mounts = vec![bind(&vols.secret_dir, "/hostpath"), bind(&vols.empty_dir, "/data")];
    set_container_namespaces(&mut app, &pod_cfg);
    let app =
        cri.create_container(&pod, &app, &pod_cfg).unwrap_or_else(|e| panic!("CreateContainer in a userns pod (handler {handler}): {e}"));
    cri.start_container(&app).unwrap_or_else(|e| panic!("StartContainer in a userns pod (handler {handler}): {e}"));
    let sh = |script: &str| {
        let r = cri.sh(&app, script);
        assert_eq!(r.code, 0, "`{script}` (handler {handler}): {r:?}");
        r.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
    };

    let want_map = format!("0 {base} 65536");
    assert_eq!(sh("cat /proc/self/uid_map"), want_map, "handler {handler}");
    assert_eq!(sh("cat /proc/self/gid_map"), want_map, "handler {handler}");
    assert_eq!(sh("id -u; id -g"), "0 0", "handler {handler}");

    // Root in the pod owns its rootfs and what it writes there is the mapped id on the host.
    assert_eq!(sh("stat -c %u:%g / /bin/busybox /etc"), "0:0 0:0 0:0", "rootfs owners (handler {handler})");
    sh("echo x > /written-by-pod-root");
    let pid = cri.container_pid(&app);
    let written = std::fs::metadata(format!("/proc/{pid}/root/written-by-pod-root")).expect("stat from the host");
    assert_eq!((written.uid(), written.gid()), (base, base), "a file the pod's root wrote (handler {handler})");

    // The host's root is nobody in the pod: its 0600 file stays unreadable through hostPath.
    assert_eq!(sh("stat -c %u:%g /hostpath/secret"), "65534:65534", "the host root's file (handler {handler})");
    let read = cri.sh(&app, "cat /hostpath/secret");
    assert!(
        read.code != 0 && !read.stdout.contains("host-secret"),
        "the pod's root read a root-only host file (handler {handler}): {read:?}"
    );

    // containerd 2.1 idmaps only its own /etc files, not CRI volumes: a volume dir owned by the
    // pod's mapped root is the pod root's; its files are the mapped id on the host.
    assert_eq!(sh("stat -c %u:%g /data"), "0:0", "the volume dir (handler {handler})");
    sh("echo y > /data/by-pod");
    let made = std::fs::metadata(vols.empty_dir.join("by-pod")).expect("stat the pod's file on the host");
    assert_eq!(made.uid(), base, "a volume file the pod's root made (handler {handler})");

    // On a v1 host: the container's name=systemd cgroup is its own, never the host's root
    // (which would show every host PID, release_agent and the other pods' cgroups).
    if std::path::Path::new("/sys/fs/cgroup/systemd/tasks").exists() {
        let named = sh("grep :name=systemd: /proc/self/cgroup | cut -d: -f3");
        assert!(named.len() > 1, "the container is in the host's root name=systemd cgroup (handler {handler}): {named:?}");
        assert_eq!(sh("ls /sys/fs/cgroup/systemd/release_agent 2>&1 >/dev/null | wc -l"), "1", "release_agent shows (handler {handler})");
    }
    // Unprivileged on the host: every uid of the container's init is the mapped one.
    assert_eq!(host_uids(pid), format!("{base} {base} {base} {base}"), "handler {handler}");
    // The sandbox made the user namespace; the container joined it.
    let pod_pid = cri.pod_pid(&pod);
    assert_ne!(ns_of(pod_pid, "user"), ns_of(std::process::id() as i32, "user"), "handler {handler}");
    assert_eq!(ns_of(pid, "user"), ns_of(pod_pid, "user"), "handler {handler}");

    assert_eq!(sh("echo via-exec > /dev/stdout"), "via-exec", "ExecSync reopening /dev/stdout (handler {handler})");
    let log = log_dir.join("app/0.log");
    wait::wait_for(&format!("the container's lines in {} (handler {handler})", log.display()), || {
        std::fs::read_to_string(&log).ok().filter(|l| l.contains("userns-log-line") && l.contains("reopened"))
    });
    cri.stop_pod(&pod).expect("StopPodSandbox");
    cri.remove_pod(&pod).expect("RemovePodSandbox");
}

#[test]
fn containerd2_status_reports_user_namespaces_for_the_runc_typed_handler() {
    let cri = containerd2_cri_or_skip!();
    let version = cri.version().expect("CRI Version").runtime_version;
    let handlers = cri.runtime_status().expect("CRI Status").runtime_handlers;
    let ours = handler(&handlers, RUNC_TYPED).features.expect("containerd introspects a runc-typed handler");
    assert!(ours.user_namespaces && ours.recursive_read_only_mounts, "containerd {version}: {handlers:#?}");
    let runc = handler(&handlers, "runc").features.expect("containerd introspects the runc handler");
    assert_eq!(runc.user_namespaces, runtime_can_idmap(&env::runc_bin()), "{handlers:#?}");
    // containerd 2.1 and 2.2 ask `-info` only of io.containerd.runc.v2 handlers (containerd
    // #13504 lifted that on main in 2026-06; gvisor#13303 saw it still in 2.2.2).
    if version.starts_with("2.1.") || version.starts_with("2.2.") {
        assert_eq!(handler(&handlers, "rustpod").features, None, "containerd {version}: {handlers:#?}");
    }
}

#[test]
fn userns_pod_runc_typed_rustpod() {
    let cri = containerd2_cri_or_skip!();
    check_userns_pod(&cri, RUNC_TYPED, host_base(0));
}

/// containerd 2.1's client wants runc's options for a user-namespaced task (it sets their
/// IoUid/IoGid): under io.containerd.rustpod.v1 (runtimeoptions.v1.Options) the sandbox runs,
/// but a container's StartContainer fails in containerd, before the shim is asked: never unmapped.
#[test]
fn userns_pod_on_the_rustpod_v1_handler() {
    let cri = containerd2_cri_or_skip!();
    let version = cri.version().expect("CRI Version").runtime_version;
    if !(version.starts_with("2.1.") || version.starts_with("2.2.")) {
        check_userns_pod(&cri, "rustpod", host_base(1));
        return;
    }
    let pod_cfg = userns_pod_config("userns-rustpod-v1", userns_pod(host_base(1)));
    let pod = cri.run_pod_with(&pod_cfg, "rustpod").expect("RunPodSandbox with userns (handler rustpod)");
    let mut app = sleeper("app");
    set_container_namespaces(&mut app, &pod_cfg);
    let app = cri.create_container(&pod, &app, &pod_cfg).expect("CreateContainer (handler rustpod)");
    let err = cri.start_container(&app).expect_err("containerd {version} started a userns container under io.containerd.rustpod.v1");
    assert!(err.message().contains("containerd.runc.v1.Options"), "{err}");
    assert_ne!(cri.state(&app), cri::ContainerState::ContainerRunning, "containerd {version}");
}

/// A userns_options kubelet never sends refused for our shim as for runc (critest's negative
/// UserNamespaces specs); a privileged container in a user-namespaced pod runs as with runc,
/// its root still mapped.
#[test]
fn userns_refusals_and_privileged_as_runc() {
    let cri = containerd2_cri_or_skip!();
    let mut handlers = vec![RUNC_TYPED];
    if runtime_can_idmap(&env::runc_bin()) {
        handlers.push("runc");
    } else {
        eprintln!("runc {} has no idmapped mounts: our shim alone", env::runc_bin().display());
    }
    for (slot, handler) in handlers.into_iter().enumerate() {
        let base = host_base(3 + slot as u32);
        let refused = |what: &str, userns: cri::UserNamespace, words: &str| {
            let pod_cfg = userns_pod_config(&format!("userns-bad-{slot}"), userns);
            let err = cri.run_pod_with(&pod_cfg, handler).expect_err(&format!("{what} ran (handler {handler})"));
            assert!(err.message().contains(words), "{what} (handler {handler}): {err}");
        };
        let mut two = userns_pod(base);
        two.uids.push(cri::IdMapping { host_id: base + 65536, container_id: 65536, length: 1 });
        two.gids = two.uids.clone();
        // containerd refuses it itself.
        refused("two uid/gid mappings", two, "required only one uid mapping");
        let mut unmapped_root = userns_pod(base);
        unmapped_root.uids[0].container_id = 1;
        unmapped_root.gids[0].container_id = 1;
        // containerd 2.1 passes it on; runc 1.3.6's words.
        refused("container id 0 unmapped", unmapped_root, "user namespaces enabled, but no mapping found for uid 0");

        let mut pod_cfg = userns_pod_config(&format!("userns-priv-{slot}"), userns_pod(base));
        pod_security(&mut pod_cfg).privileged = true;
        // Kubernetes refuses hostUsers: false with privileged: true in its API validation;
        // containerd 2.1 passes it on and runc 1.3.6 runs it: so do we, and root stays mapped.
        let pod = cri.run_pod_with(&pod_cfg, handler).unwrap_or_else(|e| panic!("RunPodSandbox (handler {handler}): {e}"));
        let mut app = sleeper("privileged");
        set_container_namespaces(&mut app, &pod_cfg);
        security(&mut app).privileged = true;
        let app = cri.run_container(&pod, &app, &pod_cfg);
        let map = cri.sh_ok(&app, "cat /proc/self/uid_map");
        assert_eq!(map.split_whitespace().collect::<Vec<_>>(), ["0", &base.to_string(), "65536"], "privileged (handler {handler})");
    }
}

#[test]
fn userns_pod_runc() {
    skip_if!((!runtime_can_idmap(&env::runc_bin()))
        .then(|| format!("{} features: no idmapped mounts (runc >= 1.2 has them)", env::runc_bin().display())));
    let cri = containerd2_cri_or_skip!();
    check_userns_pod(&cri, "runc", host_base(2));
}

/// The pod outlives a restart of containerd (hack/containerd.sh restart: the shims live on):
/// ExecSync still reaches it, in the same user namespace, for our shim as for runc.
#[test]
fn userns_pod_survives_a_containerd_restart() {
    let mut cri = containerd2_cri_or_skip!();
    let mut handlers = vec![RUNC_TYPED];
    if runtime_can_idmap(&env::runc_bin()) {
        handlers.push("runc");
    }
    let mut running = Vec::new();
    for (slot, handler) in handlers.iter().enumerate() {
        let base = host_base(5 + slot as u32);
        let pod_cfg = userns_pod_config(&format!("userns-restart-{slot}"), userns_pod(base));
        let pod = cri.run_pod_with(&pod_cfg, handler).unwrap_or_else(|e| panic!("RunPodSandbox (handler {handler}): {e}"));
        let mut app = sleeper("app");
        set_container_namespaces(&mut app, &pod_cfg);
        let app = cri.run_container(&pod, &app, &pod_cfg);
        running.push((*handler, base, app.clone(), ns_of(cri.container_pid(&app), "user")));
    }
    cri.restart_containerd();
    for (handler, base, app, userns) in running {
        let map = cri.sh_ok(&app, "cat /proc/self/uid_map");
        assert_eq!(map.split_whitespace().collect::<Vec<_>>(), ["0", &base.to_string(), "65536"], "handler {handler}");
        assert_eq!(ns_of(cri.container_pid(&app), "user"), userns, "handler {handler}");
    }
}

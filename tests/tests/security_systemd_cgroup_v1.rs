// The `name=systemd` hierarchy of a cgroup v1 host (issue 23, item 2): the container must see
// its own cgroup there, not the host's root, which shows `release_agent` and every other
// container's cgroup by name. runc puts the container in `name=systemd:<cgroupsPath>` and binds
// that cgroup at /sys/fs/cgroup/systemd, and each exec joins it; `delete`, and a failed create,
// remove it. The attack (reading the mount from inside) runs through the CLI, containerd's runc
// shim with `--runc-binary` rustpod and our shim, each next to runc.

use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, report, ShimContainerd, REPORTS};
use rustpod_tests::{cgroup, json, needs, skip_if, Bundle, Runtime, Value, SLEEP};
use std::path::Path;

/// From inside: the container's name=systemd cgroup, the root of the mount at
/// /sys/fs/cgroup/systemd, whether release_agent shows, and how many cgroups it lists.
const ATTACK: &str = "exec 2>&1; \
    echo cgroup=$(grep :name=systemd: /proc/self/cgroup | cut -d: -f3); \
    echo root=$(grep ' /sys/fs/cgroup/systemd ' /proc/self/mountinfo | cut -d' ' -f4); \
    if [ -e /sys/fs/cgroup/systemd/release_agent ]; then echo release_agent=visible; else echo release_agent=hidden; fi; \
    echo cgroups=$(find /sys/fs/cgroup/systemd/ -mindepth 1 -type d | wc -l)";

const SYSTEMD: &str = "/sys/fs/cgroup/systemd";

fn blocker() -> Option<String> {
    needs::cgroup_v1("systemd")
}

/// The report a container in `cgroup` must give.
fn confined(cgroup: &str) -> String {
    format!("cgroup={cgroup}\nroot={cgroup}\nrelease_agent=hidden\ncgroups=0\n")
}

#[track_caller]
fn assert_confined(who: &str, report: &str, cgroup: &str) {
    assert_eq!(report, confined(cgroup), "{who}: the container sees more of name=systemd than its own cgroup");
}

fn systemd_dir(cgroup: &str) -> std::path::PathBuf {
    Path::new(SYSTEMD).join(cgroup.trim_start_matches('/'))
}

#[test]
fn the_container_sees_only_its_own_name_systemd_cgroup() {
    skip_if!(blocker());
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let bundle = Bundle::new(&["sh", "-c", ATTACK]);
        let id = rt.new_id("sdcg");
        let out = rt.run(&id, &bundle, &[], b"");
        assert!(out.success(), "{who}: {}", out.describe());
        assert_confined(&who, &out.stdout, &cgroup::cgroups_path(&id));
        rt.assert_nothing_left(&id, bundle.path());
    }
}

/// A user namespace, the container's own or a pod sandbox's joined by path (a `hostUsers: false`
/// pod's containers), confines name=systemd alike: the container is in its own cgroup there.
/// Until 2026-12-07 rustpod left a user-namespaced container in the host's root cgroup of
/// name=systemd, whose mount then showed every host PID, `release_agent` and the other
/// containers' cgroups by name. Next to runc.
#[test]
fn a_user_namespaced_container_sees_only_its_own_name_systemd_cgroup() {
    skip_if!(blocker());
    let mappings = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
    let userns = |bundle: &mut Bundle, namespaces: Value| {
        bundle.set("/linux/namespaces", namespaces);
        bundle.set("/linux/uidMappings", mappings.clone());
        bundle.set("/linux/gidMappings", mappings.clone());
    };
    let own = ["pid", "network", "ipc", "uts", "mount", "user"].map(|t| json!({"type": t}));
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let mut sandbox = Bundle::new(SLEEP);
        userns(&mut sandbox, json!(own));
        let sandbox_id = rt.new_id("sdsand");
        rt.start_container(&sandbox_id, &sandbox);
        let pid = rt.pid(&sandbox_id);

        let mut alone = Bundle::new(&["sh", "-c", ATTACK]);
        userns(&mut alone, json!(own));
        let mut member = Bundle::new(&["sh", "-c", ATTACK]);
        let joined = [("user", "user"), ("network", "net"), ("ipc", "ipc"), ("uts", "uts")]
            .map(|(t, link)| json!({"type": t, "path": format!("/proc/{pid}/ns/{link}")}));
        let mut list = joined.to_vec();
        list.extend([json!({"type": "pid"}), json!({"type": "mount"})]);
        userns(&mut member, json!(list));
        member.remove("/hostname");
        for (what, bundle) in [("its own user namespace", &alone), ("the sandbox's user namespace", &member)] {
            let id = rt.new_id("sduser");
            let out = rt.run(&id, bundle, &[], b"");
            assert!(out.success(), "{who}, {what}: {}", out.describe());
            assert_confined(&format!("{who}, {what}"), &out.stdout, &cgroup::cgroups_path(&id));
            rt.assert_nothing_left(&id, bundle.path());
        }
        rt.cmd(&["delete", "--force", &sandbox_id]).ok();
        rt.assert_nothing_left(&sandbox_id, sandbox.path());
    }
}

/// What an exec'd process reports: its name=systemd cgroup.
const EXEC_ATTACK: &[&str] = &["sh", "-c", "grep :name=systemd: /proc/self/cgroup | cut -d: -f3"];

#[test]
fn an_exec_joins_the_containers_name_systemd_cgroup() {
    skip_if!(blocker());
    for rt in Runtime::runc_and_under_test() {
        let bundle = Bundle::new(SLEEP);
        let id = rt.new_id("sdexec");
        rt.start_container(&id, &bundle);
        let out = rt.exec(&id, EXEC_ATTACK).ok();
        assert_eq!(
            out.stdout.trim(),
            cgroup::cgroups_path(&id),
            "{}: the exec is not in the container's name=systemd cgroup",
            rt.bin().display()
        );
        rt.cmd(&["delete", "--force", &id]).ok();
        rt.assert_nothing_left(&id, bundle.path());
    }
}

#[test]
fn a_failed_create_leaves_no_name_systemd_cgroup() {
    skip_if!(blocker());
    for rt in Runtime::runc_and_under_test() {
        let bundle = Bundle::new(&["/does-not-exist"]);
        let id = rt.new_id("sdfail");
        rt.try_create(&id, &bundle, &[]).failed();
        let dir = systemd_dir(&cgroup::cgroups_path(&id));
        assert!(!dir.exists(), "{}: {} left after a failed create", rt.bin().display(), dir.display());
        rt.assert_nothing_left(&id, bundle.path());
    }
}

/// The attack's spec for `ctr run --config`: ctr's own spec, with the cgroup mount containerd's
/// CRI adds, running the attack into REPORTS/`name` (ctr's output is not to be trusted).
fn attack_spec(ctd: &ShimContainerd, name: &str, rootfs: &str, dir: &ScratchDir) -> Value {
    let mut spec = ctd.oci_spec_with_reports(name, rootfs, dir);
    spec["process"]["args"] = json!(["sh", "-c", format!("exec >{REPORTS}/{name}; {ATTACK}")]);
    let mounts = spec["mounts"].as_array_mut().expect("ctr's spec has mounts");
    mounts.push(json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                       "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}));
    spec
}

#[test]
fn the_container_sees_only_its_own_name_systemd_cgroup_through_the_shims() {
    skip_if!(blocker().or_else(shim::blocker));
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("sdspec");
    for (i, (who, flags)) in shim::paths().iter().enumerate() {
        let name = format!("sdcg{i}");
        let rootfs = Bundle::new(&["true"]);
        ctd.run_spec(&dir, &name, &attack_spec(&ctd, &name, &rootfs.rootfs(), &dir), "--rm", flags).ok();
        let cgroup = format!("/{}/{name}", ctd.namespace);
        assert_confined(who, &report(&dir, &name), &cgroup);
        let left = systemd_dir(&cgroup);
        assert!(!left.exists(), "{who}: {} left after the container was removed", left.display());
    }
}

#[test]
fn an_exec_joins_the_containers_name_systemd_cgroup_through_the_shims() {
    skip_if!(blocker().or_else(shim::blocker));
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("sdexspec");
    for (i, (who, flags)) in shim::paths().iter().enumerate() {
        let name = format!("sdex{i}");
        let rootfs = Bundle::new(&["true"]);
        ctd.run_spec(&dir, &name, &ctd.oci_spec_with_reports(&name, &rootfs.rootfs(), &dir), "-d", flags).ok();
        ctd.wait_task(&name, "RUNNING");
        let attack = format!("exec >{REPORTS}/exec-{name}; {}", EXEC_ATTACK[2]);
        ctd.ctr(&["task", "exec", "--exec-id", "e1", &name, "sh", "-c", &attack]).ok();
        let cgroup = format!("/{}/{name}", ctd.namespace);
        assert_eq!(report(&dir, &format!("exec-{name}")).trim(), cgroup, "{who}: the exec is not in the container's name=systemd cgroup");
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", &name]).ok();
        ctd.wait_task(&name, "STOPPED");
        ctd.ctr(&["task", "delete", &name]).ok();
        ctd.ctr(&["container", "rm", &name]).ok();
        let left = systemd_dir(&cgroup);
        assert!(!left.exists(), "{who}: {} left after the container was removed", left.display());
    }
}

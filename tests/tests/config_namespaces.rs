// linux.namespaces (issue 3): every type made new, types left out shared with the host, joining
// a "sandbox" container's namespaces by path as pod containers do, and a user namespace with
// uid/gid mappings; compared through the checker's /proc/self/ns links and maps.

use rustpod_tests::checker::{self, ns_of, Report};
use rustpod_tests::mount_ns::Held;
use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{conform, env, json, needs, skip_if, Bundle, Output, Runtime, Value, SLEEP};
use std::collections::BTreeSet;

/// OCI namespace type → /proc/self/ns link name.
const TYPES: [(&str, &str); 8] = [
    ("pid", "pid"),
    ("network", "net"),
    ("mount", "mnt"),
    ("ipc", "ipc"),
    ("uts", "uts"),
    ("user", "user"),
    ("cgroup", "cgroup"),
    ("time", "time"),
];

const MAPPING: [(u32, u32, u32); 1] = [(0, 100_000, 65_536)];

fn namespaces(types: &[&str]) -> Value {
    json!(types.iter().map(|t| json!({"type": t})).collect::<Vec<_>>())
}

fn mappings() -> Value {
    json!(MAPPING.iter().map(|(c, h, s)| json!({"containerID": c, "hostID": h, "size": s})).collect::<Vec<_>>())
}

/// The namespace links in the checker's report from inside vs on the host: (type, inside, host).
fn inside_and_host(inside: &Report) -> Vec<(&'static str, String, String)> {
    let host = checker::host_report(&[]);
    TYPES
        .iter()
        .map(|(oci, link)| {
            let at = format!("/namespaces/{link}");
            (*oci, inside.str(&at).to_string(), host.str(&at).to_string())
        })
        .collect()
}

#[test]
fn every_namespace_type_is_new() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&[]);
    bundle.set("/linux/namespaces", namespaces(&TYPES.map(|(oci, _)| oci)));
    bundle.set("/linux/uidMappings", mappings());
    bundle.set("/linux/gidMappings", mappings());
    let out = checker::try_run(&Runtime::under_test(), &bundle);
    conform!(out.success(), "all 8 namespace types: {}", out.describe());
    let mut shared = vec![];
    for (oci, inside, host) in inside_and_host(&Report::from_output(out)) {
        assert!(!inside.is_empty(), "no {oci} namespace link inside");
        if inside == host {
            shared.push(oci);
        }
    }
    conform!(shared.is_empty(), "namespaces asked to be new are the host's: {shared:?}");
}

#[test]
fn namespaces_left_out_are_the_hosts() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&[]);
    bundle.set("/linux/namespaces", namespaces(&["mount"]));
    bundle.remove("/hostname");
    let report = Report::run(&Runtime::under_test(), &bundle);
    for (oci, inside, host) in inside_and_host(&report) {
        if oci == "mount" {
            assert_ne!(inside, host, "mount namespace must be new");
        } else {
            assert_eq!(inside, host, "{oci} namespace was not asked for");
        }
    }
}

#[test]
fn user_namespace_with_mappings() {
    skip_if!(needs::containers());
    let mut bundle = checker::bundle(&[]);
    let types = ["pid", "network", "ipc", "uts", "mount", "user"];
    bundle.set("/linux/namespaces", namespaces(&types));
    bundle.set("/linux/uidMappings", mappings());
    bundle.set("/linux/gidMappings", mappings());
    let report = Report::run(&Runtime::under_test(), &bundle);
    let expected = json!(MAPPING.map(|(c, h, s)| [c, h, s]));
    assert_eq!(report.at("/uid_map"), &expected);
    assert_eq!(report.at("/gid_map"), &expected);
    assert_eq!(report.at("/ids/uid"), 0, "root inside the user namespace");
}

/// Two uid and gid ranges, as root may give: the parent writes both (runc does too, without
/// newuidmap, which libcontainer asks for when there is more than one range).
#[test]
fn a_user_namespace_with_two_ranges_is_mapped_as_runc_maps_it() {
    skip_if!(needs::containers());
    let ranges = [(0, 100_000, 1_000), (1_000, 200_000, 1_000)];
    let maps = json!(ranges.iter().map(|(c, h, s)| json!({"containerID": c, "hostID": h, "size": s})).collect::<Vec<_>>());
    for rt in Runtime::runc_and_under_test() {
        let mut bundle = checker::bundle(&[]);
        bundle.set("/linux/namespaces", namespaces(&["pid", "network", "ipc", "uts", "mount", "user"]));
        bundle.set("/linux/uidMappings", maps.clone());
        bundle.set("/linux/gidMappings", maps.clone());
        let report = Report::run(&rt, &bundle);
        let expected = json!(ranges.map(|(c, h, s)| [c, h, s]));
        assert_eq!(report.at("/uid_map"), &expected, "{}", rt.bin().display());
        assert_eq!(report.at("/gid_map"), &expected, "{}", rt.bin().display());
    }
}

#[test]
fn pod_containers_join_the_sandbox_namespaces_by_path() {
    skip_if!(needs::containers());
    let rt = Runtime::under_test();
    let sandbox = checker::bundle_running(SLEEP);
    let sandbox_id = rt.new_id("sandbox");
    rt.start_container(&sandbox_id, &sandbox);
    let pid = rt.pid(&sandbox_id);

    let joined = [("network", "net"), ("ipc", "ipc"), ("pid", "pid"), ("uts", "uts")];
    let mut member = checker::bundle(&[]);
    let mut list: Vec<Value> = joined.iter().map(|(oci, link)| json!({"type": oci, "path": format!("/proc/{pid}/ns/{link}")})).collect();
    list.push(json!({"type": "mount"}));
    member.set("/linux/namespaces", json!(list));
    member.remove("/hostname");
    let report = Report::run(&rt, &member);
    for (oci, link) in joined {
        assert_eq!(report.str(&format!("/namespaces/{link}")), ns_of(pid, link), "{oci} namespace must be the sandbox's");
    }
    assert_ne!(report.str("/namespaces/mnt"), ns_of(pid, "mnt"));
    assert_ne!(report.at("/pid"), 1, "the sandbox's init is pid 1 there");
    assert_eq!(report.str("/hostname"), "rustpod", "the sandbox's hostname");
}

/// What a container in a joined mount namespace shows: its mount points and types, whether a
/// masked path is empty, how a write to a read-only one fails, and its mount namespace.
const LOOK_FROM_A_JOINED_MOUNT_NS: &str = "cut -d' ' -f5,9 /proc/self/mountinfo; echo timer_list=$(wc -c < /proc/timer_list); \
    (echo x > /proc/sys/kernel/hostname) 2>&1 | sed 's/.*: //'; readlink /proc/self/ns/mnt";

/// `out` of LOOK_FROM_A_JOINED_MOUNT_NS, checked to come from `held`'s namespace, which it
/// then names `mnt:[joined]`.
#[track_caller]
fn from_the_held_namespace(who: &str, out: &Output, held: &Held) -> String {
    assert_eq!(out.code(), 0, "{who}: {}", out.describe());
    let held_ns = std::fs::read_link(held.path()).expect("readlink the held namespace").to_string_lossy().into_owned();
    assert_eq!(out.stdout.lines().last(), Some(held_ns.as_str()), "{who}: not in the joined namespace: {}", out.describe());
    out.stdout.replace(&held_ns, "mnt:[joined]")
}

/// `ours` shows what `oracle` does, and the masked and read-only paths hold.
#[track_caller]
fn assert_joined_as(oracle: &str, ours: &str, crun: bool, differs: &str) {
    match crun {
        // crun masks with binds of /dev/null and of an empty directory, and before the
        // read-only paths: next to it, the mount points alone, in any order.
        true => {
            let points = |out: &str| out.lines().map(|l| l.split(' ').next().unwrap_or_default().to_string()).collect::<BTreeSet<_>>();
            assert_eq!(points(ours), points(oracle), "{differs}");
        }
        false => assert_eq!(ours, oracle, "{differs}"),
    }
    assert!(ours.starts_with("/ ") && ours.contains("timer_list=0\nRead-only file system\n"), "{differs}: {ours}");
}

/// A mount namespace joined by path (held by a `sleep` of the suite's on the host; each container its own, as
/// a container pivots the namespace it joins), alone and with the user namespace that owns it:
/// the rootfs is made and pivoted into there, as runc does. What shows is runc's: the mount
/// points and types (the host's own mounts gone), a masked path empty, a read-only one refusing
/// writes; the container's namespace is the held one.
#[test]
fn a_joined_mount_namespace_gets_the_rootfs_as_runcs_does() {
    skip_if!(needs::containers());
    for user in [false, true] {
        let seen = |rt: &Runtime| {
            let held = hold(user);
            let mut bundle = Bundle::new(&["sh", "-c", LOOK_FROM_A_JOINED_MOUNT_NS]);
            bundle.edit(|spec| held.join(spec));
            let out = rt.run(&rt.new_id("joined-mnt"), &bundle, &[], b"");
            from_the_held_namespace(&rt.bin().display().to_string(), &out, &held)
        };
        let (oracle, ours) = (seen(&Runtime::runc()), seen(&Runtime::under_test()));
        let differs = format!(
            "{} differs from {} (user namespace joined: {user})",
            Runtime::under_test().bin().display(),
            Runtime::runc().bin().display()
        );
        assert_joined_as(&oracle, &ours, env::is_crun(Runtime::runc().bin()), &differs);
    }
}

/// A mount namespace to join, held with the user namespace that owns it if `user`.
fn hold(user: bool) -> Held {
    match user {
        true => Held::unshare_with_user(),
        false => Held::unshare(),
    }
}

/// The same through containerd, from ctr's own spec: its runc shim driving runc (the
/// reference), then rustpod, and our shim.
#[test]
fn through_containerd_a_joined_mount_namespace_gets_the_rootfs_on_every_path() {
    skip_if!(shim::blocker_with_runc());
    let ctd = ShimContainerd::start();
    let (dir, rootfs) = (ScratchDir::new("joined-mnt"), Bundle::new(SLEEP));
    for user in [false, true] {
        let mut reference = None;
        for (path, flags) in shim::paths() {
            let held = hold(user);
            let id = unique_name(path);
            let mut spec = ctd.oci_spec(&id, &rootfs.rootfs());
            spec["process"]["args"] = json!(["sh", "-c", LOOK_FROM_A_JOINED_MOUNT_NS]);
            held.join(&mut spec);
            let out = ctd.run_spec(&dir, &id, &spec, "--rm", &flags);
            let seen = from_the_held_namespace(path, &out, &held);
            let oracle = reference.get_or_insert_with(|| seen.clone());
            let differs = format!("{path}: next to the reference (user namespace joined: {user})");
            assert_joined_as(oracle, &seen, env::is_crun(&env::runc_bin()), &differs);
        }
    }
}

/// A user-namespaced pod's container joins the sandbox's namespaces by path while the sandbox's
/// init has not exec'd yet (held here by a startContainer hook; under CRI, the moment between
/// the sandbox's Start and its exec). That init is not dumpable, so its namespace files cannot
/// be opened from inside the user namespace: runc opens them all before its first setns, and
/// rustpod's parent opens them for the engine (run 46 saw `EACCES` under containerd).
#[test]
fn a_userns_pod_container_joins_a_sandbox_that_has_not_exec_d() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let types = ["pid", "ipc", "uts", "mount", "user", "network"];
        let mut sandbox = checker::bundle_running(SLEEP);
        sandbox.set("/linux/namespaces", namespaces(&types));
        sandbox.set("/linux/uidMappings", mappings());
        sandbox.set("/linux/gidMappings", mappings());
        sandbox.set("/hooks", json!({"startContainer": [{"path": "/bin/sleep", "args": ["sleep", "3"]}]}));
        let sandbox_id = rt.new_id("heldsandbox");
        rt.create(&sandbox_id, &sandbox);
        let pid = rt.pid(&sandbox_id);
        let start = rt.spawn_stdin(&["start", &sandbox_id], b"");

        let joined = [("user", "user"), ("ipc", "ipc"), ("uts", "uts"), ("network", "net")];
        let mut member = checker::bundle(&[]);
        let mut list: Vec<Value> =
            joined.iter().map(|(oci, link)| json!({"type": oci, "path": format!("/proc/{pid}/ns/{link}")})).collect();
        list.extend([json!({"type": "pid"}), json!({"type": "mount"})]);
        member.set("/linux/namespaces", json!(list));
        member.set("/linux/uidMappings", mappings());
        member.set("/linux/gidMappings", mappings());
        member.remove("/hostname");
        let out = checker::try_run(&rt, &member);
        start.wait().ok();
        assert!(out.success(), "{}: a container joining a held sandbox's namespaces: {}", rt.bin().display(), out.describe());
        let report = Report::from_output(out);
        for (oci, link) in joined {
            assert_eq!(report.str(&format!("/namespaces/{link}")), ns_of(pid, link), "{}: the {oci} namespace", rt.bin().display());
        }
    }
}

/// An exec into a user-namespaced container whose init has not exec'd yet (held by a
/// startContainer hook; under CRI, an ExecSync right after StartContainer): that init is not
/// dumpable, so its namespace files cannot be opened from inside its user namespace. runc opens
/// them all as the host's root before it joins any; so does rustpod's exec (CRI's ExecSync saw
/// `EACCES` opening the init's ipc namespace after the user one was joined).
#[test]
fn an_exec_joins_a_userns_container_whose_init_has_not_exec_d() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let mut bundle = checker::bundle_running(SLEEP);
        bundle.set("/linux/namespaces", namespaces(&["pid", "ipc", "uts", "mount", "user", "network"]));
        bundle.set("/linux/uidMappings", mappings());
        bundle.set("/linux/gidMappings", mappings());
        bundle.set("/hooks", json!({"startContainer": [{"path": "/bin/sleep", "args": ["sleep", "3"]}]}));
        let id = rt.new_id("heldexec");
        rt.create(&id, &bundle);
        let pid = rt.pid(&id);
        let start = rt.spawn_stdin(&["start", &id], b"");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let out = rt.exec(&id, &["sh", "-c", "for ns in user ipc net; do readlink /proc/self/ns/$ns; done"]);
        start.wait().ok();
        assert!(out.success(), "{}: an exec while the init is held: {}", rt.bin().display(), out.describe());
        let want: Vec<String> = ["user", "ipc", "net"].iter().map(|link| ns_of(pid, link)).collect();
        assert_eq!(out.stdout.lines().collect::<Vec<_>>(), want, "{}: the exec's namespaces", rt.bin().display());
    }
}

/// A user-namespaced container told to join a namespace that does not exist fails create on one
/// line naming the path, as runc's does, and leaves nothing behind.
#[test]
fn a_userns_container_joining_a_missing_namespace_fails_cleanly() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let mut bundle = checker::bundle(&[]);
        let missing = "/proc/999999999/ns/net";
        bundle
            .set("/linux/namespaces", json!([{"type": "pid"}, {"type": "mount"}, {"type": "user"}, {"type": "network", "path": missing}]));
        bundle.set("/linux/uidMappings", mappings());
        bundle.set("/linux/gidMappings", mappings());
        let id = rt.new_id("missingns");
        let out = rt.try_create(&id, &bundle, &[]);
        assert!(!out.success(), "{}: created with {missing}: {}", rt.bin().display(), out.describe());
        if rt.bin() == rustpod_tests::env::rustpod_bin() {
            rustpod_tests::assertions::assert_one_line_error(&out, &[missing]);
        }
        rt.assert_nothing_left(&id, bundle.path());
    }
}

/// The user namespace that owns namespace file `path` (ioctl NS_GET_USERNS), as its link text.
fn owner_of(path: &str) -> String {
    let ns = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {path}: {e}"));
    // SAFETY: NS_GET_USERNS takes no argument and returns a new fd, which is closed below.
    let owner = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&ns), 0xb701) };
    assert!(owner >= 0, "ioctl(NS_GET_USERNS) of {path}: {}", std::io::Error::last_os_error());
    let link = std::fs::read_link(format!("/proc/self/fd/{owner}")).expect("readlink the owner");
    // SAFETY: the fd the ioctl returned, ours to close.
    unsafe { libc::close(owner) };
    link.to_string_lossy().into_owned()
}

/// A `hostUsers: false` pod's container joins the sandbox's user namespace by path and gets new
/// pid, network, IPC, mount and UTS namespaces: each must be owned by the joined user namespace,
/// never the host's (a pid namespace of the host's would keep its root from mounting its procfs;
/// a network one from configuring it), and the container's program must hold no descriptor of
/// the runtime's (the sandbox's namespace fds the parent opened, the pipe its init's pid came
/// on). rustpod makes them with a first child that joins and then clones the init; next to runc.
#[test]
fn a_joined_user_namespace_owns_the_containers_new_namespaces_and_leaks_no_fd() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let mut sandbox = checker::bundle_running(SLEEP);
        sandbox.set("/linux/namespaces", namespaces(&["pid", "ipc", "uts", "mount", "user", "network"]));
        sandbox.set("/linux/uidMappings", mappings());
        sandbox.set("/linux/gidMappings", mappings());
        let sandbox_id = rt.new_id("ownsand");
        rt.start_container(&sandbox_id, &sandbox);
        let pid = rt.pid(&sandbox_id);
        let userns = ns_of(pid, "user");

        let mut member = checker::bundle_running(SLEEP);
        let mut list = vec![json!({"type": "user", "path": format!("/proc/{pid}/ns/user")})];
        list.extend(["pid", "network", "ipc", "uts", "mount"].map(|t| json!({"type": t})));
        member.set("/linux/namespaces", json!(list));
        member.set("/linux/uidMappings", mappings());
        member.set("/linux/gidMappings", mappings());
        let id = rt.new_id("ownmember");
        rt.start_container(&id, &member);
        let init = rt.pid(&id);
        assert_eq!(ns_of(init, "user"), userns, "{who}: the sandbox's user namespace");
        for ns in ["pid", "net", "ipc", "uts", "mnt"] {
            assert_ne!(ns_of(init, ns), ns_of(pid, ns), "{who}: a new {ns} namespace");
            assert_eq!(owner_of(&format!("/proc/{init}/ns/{ns}")), userns, "{who}: the owner of the container's {ns} namespace");
        }
        // `start` returns once the init is told to go, maybe before it has exec'd (runc's init
        // then still holds its Go runtime's fds): the program's are what count.
        let comm = format!("/proc/{init}/comm");
        let execd = rustpod_tests::wait::eventually(|| std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "sleep"));
        assert!(execd, "{who}: the init did not exec sleep within {:?}", rustpod_tests::wait::DEADLINE);
        let fds: Vec<String> = std::fs::read_dir(format!("/proc/{init}/fd"))
            .expect("list the init's fds")
            .map(|e| {
                let e = e.expect("an fd entry");
                let target = std::fs::read_link(e.path()).map(|l| l.display().to_string()).unwrap_or_default();
                format!("{}:{target}", e.file_name().to_string_lossy())
            })
            .collect();
        assert!(fds.iter().all(|fd| ["0:", "1:", "2:"].iter().any(|std| fd.starts_with(std))), "{who}: the program holds {fds:?}");
        rt.cmd(&["delete", "--force", &id]).ok();
        rt.cmd(&["delete", "--force", &sandbox_id]).ok();
        rt.assert_nothing_left(&id, member.path());
        rt.assert_nothing_left(&sandbox_id, sandbox.path());
    }
}

/// A new user namespace with a network namespace given by path that the host's user namespace
/// owns (one made before the container, as a CNI or `ip netns` makes it): runc joins the given
/// namespaces first, then makes the user namespace, since from inside it the host's network
/// namespace cannot be joined. rustpod's first child does the same, then clones the init. The
/// container's root is mapped, its network namespace is the given one, and it is pid 1 of its
/// own pid namespace. (Nothing under /sys: the kernel lets a user namespace mount a sysfs only
/// for a network namespace it owns.)
#[test]
fn a_new_user_namespace_joins_a_host_network_namespace_first() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let who = rt.bin().display().to_string();
        let holder = checker::bundle_running(SLEEP);
        let holder_id = rt.new_id("hostnet");
        rt.start_container(&holder_id, &holder);
        let pid = rt.pid(&holder_id);

        let mut member = checker::bundle(&[]);
        let mut list: Vec<Value> = ["pid", "ipc", "uts", "mount", "user"].map(|t| json!({"type": t})).to_vec();
        list.push(json!({"type": "network", "path": format!("/proc/{pid}/ns/net")}));
        member.set("/linux/namespaces", json!(list));
        member.set("/linux/uidMappings", mappings());
        member.set("/linux/gidMappings", mappings());
        let mounts: Vec<Value> = member.config()["mounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .filter(|m| !m["destination"].as_str().unwrap_or_default().starts_with("/sys"))
            .cloned()
            .collect();
        member.set("/mounts", json!(mounts));
        let report = Report::run(&rt, &member);
        assert_eq!(report.str("/namespaces/net"), ns_of(pid, "net"), "{who}: the given network namespace");
        assert_ne!(report.str("/namespaces/user"), ns_of(pid, "user"), "{who}: a user namespace of its own");
        assert_eq!(report.at("/uid_map"), &json!(MAPPING.map(|(c, h, s)| [c, h, s])), "{who}");
        assert_eq!(report.at("/ids/uid"), 0, "{who}: root inside");
        assert_eq!(report.at("/pid"), 1, "{who}: pid 1 of its own pid namespace");
        rt.cmd(&["delete", "--force", &holder_id]).ok();
        rt.assert_nothing_left(&holder_id, holder.path());
    }
}

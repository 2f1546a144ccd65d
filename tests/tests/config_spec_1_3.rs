// runtime-spec 1.2/1.3 fields (issue 24): each is either applied as runc 1.5 applies it (checked
// in the kernel's view) or refused at create with one line naming the field, leaving nothing.
// Nothing is silently ignored. runc 1.1.5 (Debian 12) runs the same config where it knows the
// field; where it differs, tests/RUNC_DIFFERENCES.md says so.

use rustpod_tests::assertions::{assert_create_fails_as_runcs, assert_one_line_error};
use rustpod_tests::checker::{report_with, strings};
use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{env, json, needs, skip, skip_if, Bundle, Fixture, Runtime, Value, SLEEP};

fn tmpfs(destination: &str, options: &[&str]) -> Value {
    json!({"destination": destination, "type": "tmpfs", "source": "tmpfs", "options": options})
}

fn bind_tmp(destination: &str, options: &[&str]) -> Value {
    json!({"destination": destination, "type": "bind", "source": "/tmp", "options": options})
}

/// `create` with `mount` added fails with one line naming the mount (its index and destination)
/// and `field`, and leaves nothing (state dir, cgroup, mount, process).
fn refused_at_create(mount: Value, field: &str) {
    let mut fx = Fixture::new(SLEEP);
    fx.bundle.add_mount(tmpfs("/ok", &[]));
    fx.bundle.add_mount(mount.clone());
    let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
    assert_one_line_error(&out, &[field]);
    let line = out.stderr.trim_end();
    let dest = mount["destination"].as_str().unwrap();
    assert!(line.contains(&format!("({dest})")) && line.contains("mounts["), "names the mount: {line}");
    fx.assert_nothing_left();
}

/// How the one error line names `option`: quoted, and escaped once more by the log format.
fn option_named(option: &str) -> String {
    format!("option \\\"{option}\\\"")
}

/// runc 1.5's `tmpcopyup` (libcontainer passed it to mount(2) as data, which failed with only
/// "failed to prepare rootfs"): the tmpfs at /etc starts with the image's files, owners and
/// modes, is writable, and the image is untouched; next to runc 1.1.5, which has it too.
#[test]
fn tmpcopyup_fills_the_tmpfs_with_the_images_files() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        tmpcopyup_on(rt, false);
    }
}

/// The same in a user namespace, which keeps rustpod on the engine's rootfs steps: there the
/// engine mounted the read-only tmpfs read-only and our copy into it failed create with EROFS.
/// runc fills it first and remounts it read-only; so does rustpod now.
#[test]
fn tmpcopyup_read_only_fills_the_tmpfs_in_a_user_namespace() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        tmpcopyup_on(rt, true);
    }
}

/// A writable `tmpcopyup` tmpfs at /etc and a read-only one at /var, each with the image's
/// files, owners and modes; the image untouched. With `userns`, in a user namespace mapping
/// root to host uid 100000.
fn tmpcopyup_on(rt: Runtime, userns: bool) {
    let mut fx = Fixture::on(rt, SLEEP);
    let expected = tmpcopyup_image(&fx.bundle, userns);
    for mount in tmpcopyup_mounts() {
        fx.bundle.add_mount(mount);
    }
    fx.bundle.set("/process/args", json!(["sh", "-c", TMPCOPYUP_SCRIPT]));
    if userns {
        fx.bundle.set("/linux/namespaces", json!(["pid", "network", "ipc", "uts", "mount", "user"].map(|t| json!({"type": t}))));
        fx.bundle.set("/linux/uidMappings", COPYUP_MAP.clone());
        fx.bundle.set("/linux/gidMappings", COPYUP_MAP.clone());
    }
    let out = fx.rt.run(&fx.id, &fx.bundle, &[], b"");
    let rt = fx.rt.bin().display();
    assert_eq!(out.stdout, expected, "{rt} (userns {userns}): {}", out.describe());
    assert_image_untouched(&fx.bundle, &rt.to_string());
}

/// The same user-namespaced container through containerd: its runc shim driving runc and
/// rustpod, and our shim (each reaches the copy through the engine's rootfs steps or runc's).
#[test]
fn tmpcopyup_read_only_fills_the_tmpfs_in_a_user_namespace_through_containerd() {
    skip_if!(shim::blocker());
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("copyup-ctr");
    for (path, flags) in shim::paths() {
        let bundle = Bundle::new(SLEEP);
        let expected = tmpcopyup_image(&bundle, true);
        let name = format!("copyup-{path}");
        let mut spec = ctd.oci_spec(&name, &bundle.rootfs());
        spec["linux"]["namespaces"].as_array_mut().expect("namespaces").push(json!({"type": "user"}));
        spec["linux"]["uidMappings"] = COPYUP_MAP.clone();
        spec["linux"]["gidMappings"] = COPYUP_MAP.clone();
        spec["mounts"].as_array_mut().expect("mounts").extend(tmpcopyup_mounts());
        spec["process"]["args"] = json!(["sh", "-c", TMPCOPYUP_SCRIPT]);
        let out = ctd.run_spec(&dir, &name, &spec, "--rm", &flags);
        assert_eq!(out.stdout, expected, "{path}: {}", out.describe());
        assert_image_untouched(&bundle, path);
        assert_eq!(ctd.task(&name), None, "{path}: no task left");
    }
}

/// Prints the image's passwd, the copied file's mode and owner, writes /etc, lists /var and
/// says `ro` when /var refuses a write.
const TMPCOPYUP_SCRIPT: &str =
    "cat /etc/passwd && stat -c '%a %u' /etc/sub/f && echo new > /etc/new && ls /var && ! touch /var/x 2>/dev/null && echo ro";

/// Root of the user namespace at host uid and gid 100000.
static COPYUP_MAP: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!([{"containerID": 0, "hostID": 100_000, "size": 65_536}]));

/// The tmpfs mounts: /etc writable, /var read-only (filled first, then made read-only, as runc
/// remounts it).
fn tmpcopyup_mounts() -> [Value; 2] {
    [tmpfs("/etc", &["tmpcopyup"]), tmpfs("/var", &["tmpcopyup", "ro"])]
}

/// Adds etc/sub/f (mode 0640) and var/from-image to `bundle`'s image; returns what
/// TMPCOPYUP_SCRIPT prints there. In a user namespace the file's owner is a host uid and gid
/// it maps (65534 inside), or its root could not read the file to copy it.
fn tmpcopyup_image(bundle: &Bundle, userns: bool) -> String {
    let rootfs = std::path::Path::new(&bundle.rootfs()).to_path_buf();
    let image_etc = rootfs.join("etc");
    std::fs::create_dir(image_etc.join("sub")).expect("mkdir etc/sub");
    std::fs::write(image_etc.join("sub/f"), "x").expect("write etc/sub/f");
    let (host_owner, owner_inside) = if userns { (165_534, 65_534) } else { (65_534, 65_534) };
    std::os::unix::fs::chown(image_etc.join("sub/f"), Some(host_owner), userns.then_some(host_owner)).expect("chown");
    std::fs::set_permissions(image_etc.join("sub/f"), std::os::unix::fs::PermissionsExt::from_mode(0o640)).expect("chmod");
    std::fs::create_dir_all(rootfs.join("var/from-image")).expect("mkdir var/from-image");
    let passwd = std::fs::read_to_string(image_etc.join("passwd")).expect("read passwd");
    format!("{passwd}640 {owner_inside}\nfrom-image\nro\n")
}

fn assert_image_untouched(bundle: &Bundle, who: &str) {
    let new = std::path::Path::new(&bundle.rootfs()).join("etc/new");
    assert!(!new.exists(), "{who}: the write went to the image");
}

/// A `tmpcopyup` whose copy cannot fit (a 4 KiB tmpfs over the image's /bin): create fails, as
/// runc's does, and rustpod's one line names the mount, tmpcopyup and ENOSPC; nothing is left
/// behind (state dir, cgroup, mount, process).
#[test]
fn a_tmpcopyup_that_does_not_fit_fails_create_in_one_line_and_leaves_nothing() {
    skip_if!(needs::containers());
    let mount = tmpfs("/bin", &["tmpcopyup", "size=4k"]);
    assert_create_fails_as_runcs("the copy is larger than its tmpfs", &[mount], &["tmpcopyup", "ENOSPC", "/bin"]);
}

/// `tmpcopyup` on a bind, a superblock flag on a bind and filesystem data on a bind (runc lets
/// the kernel ignore all three), are refused in one line naming the mount and option.
#[test]
fn unapplied_mount_options_are_refused_naming_the_mount_and_option() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc ignores these on a bind (RUNC_DIFFERENCES.md)");
    }
    refused_at_create(bind_tmp("/b", &["rbind", "tmpcopyup"]), &option_named("tmpcopyup"));
    refused_at_create(bind_tmp("/b", &["rbind", "lazytime"]), &option_named("lazytime"));
    refused_at_create(bind_tmp("/b", &["rbind", "sync"]), &option_named("sync"));
    refused_at_create(bind_tmp("/b", &["rbind", "ro", "size=1m"]), &option_named("size=1m"));
}

/// The superblock flags of a fresh mount (runc 1.5: mount(2) flags), as the kernel shows them
/// in the container's mountinfo: `lazytime` set, `nolazytime` after it cleared; the mount's
/// own flags (`ro`, `nosuid`, `nosymfollow`) survive the remount; `iversion`, `silent` and
/// `loud` are taken too.
#[test]
fn superblock_flags_reach_the_kernel() {
    superblock_flags_reach_the_kernel_with(
        &["ro", "nosuid", "lazytime", "iversion", "silent", "nosymfollow"],
        &["lazytime", "nolazytime", "loud", "noiversion"],
    );
}

/// `lazytime` and `nolazytime` alone: fsconfig(2) takes both as flags of a new filesystem, so
/// such a container takes our rootfs steps (`engine_budget`), not the engine's remount.
#[test]
fn lazytime_alone_reaches_the_kernel() {
    superblock_flags_reach_the_kernel_with(&["ro", "nosuid", "lazytime", "nosymfollow"], &["lazytime", "nolazytime"]);
}

/// A container with a tmpfs at /lazy (`lazy`: `lazytime` and `ro,nosuid,nosymfollow` among
/// them) and one at /eager (`eager`: `lazytime` cleared again), next to runc.
fn superblock_flags_reach_the_kernel_with(lazy: &[&str], eager: &[&str]) {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let mut fx = Fixture::on(rt, SLEEP);
        fx.bundle.add_mount(tmpfs("/lazy", lazy));
        fx.bundle.add_mount(tmpfs("/eager", eager));
        let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
        let bin = fx.rt.bin().display().to_string();
        if env::is_runc(fx.rt.bin()) && !out.success() {
            eprintln!("{bin}: {}", out.stderr.trim_end());
            continue;
        }
        assert!(out.success(), "{}", out.describe());
        let info = std::fs::read_to_string(format!("/proc/{}/mountinfo", fx.rt.pid(&fx.id))).expect("read mountinfo");
        let line = |at: &str| -> (String, String) {
            let line =
                info.lines().find(|l| l.split(' ').nth(4).is_some_and(|p| p.ends_with(at))).unwrap_or_else(|| panic!("{at}: {info}"));
            let (mine, sb) = line.split_once(" - ").expect("separator");
            (mine.split(' ').nth(5).unwrap_or_default().to_string(), sb.split(' ').nth(2).unwrap_or_default().to_string())
        };
        let (lazy_mount, lazy_sb) = line("/lazy");
        assert!(lazy_sb.split(',').any(|o| o == "lazytime"), "{bin} /lazy: {lazy_sb}");
        for flag in ["ro", "nosuid", "nosymfollow"] {
            assert!(lazy_mount.split(',').any(|o| o == flag), "{bin} /lazy lost {flag}: {lazy_mount}");
        }
        let (_, eager_sb) = line("/eager");
        assert!(!eager_sb.split(',').any(|o| o == "lazytime"), "{bin} /eager: {eager_sb}");
    }
}

/// `nosymfollow` on a mount (MS_NOSYMFOLLOW, that mount only) and the recursive
/// `rnosymfollow`: the kernel shows `nosymfollow` in mountinfo, `symfollow` clears it.
#[test]
fn nosymfollow_and_symfollow_reach_the_kernel() {
    skip_if!(needs::containers());
    let report = report_with(&[], |b| {
        b.add_mount(tmpfs("/nosym", &["nosymfollow"]));
        b.add_mount(tmpfs("/sym", &["nosymfollow", "symfollow"]));
        b.add_mount(bind_tmp("/rnosym", &["rbind", "rnosymfollow"]));
        b.add_mount(bind_tmp("/bindnosym", &["bind", "nosymfollow"]));
    });
    let table = report.mount_table();
    for at in ["/nosym", "/rnosym", "/bindnosym"] {
        assert!(report.mount_options(at).contains("nosymfollow"), "{at}: {table}");
    }
    assert!(!report.mount_options("/sym").contains("nosymfollow"), "/sym: {table}");
    let listed = strings(&Runtime::under_test().cmd(&["features"]).ok().stdout_json()["mountOptions"]);
    if !env::testing_runc_itself() {
        for option in ["nosymfollow", "symfollow", "rnosymfollow", "rsymfollow"] {
            assert!(listed.iter().any(|o| o == option), "features omits {option}: {listed:?}");
        }
    }
}

/// runtime-spec 1.3 / runc ≥ 1.4: `pids.limit: 0` is a real limit (pids.max 1, as runc writes it
/// with either cgroup driver: the init alone, no new task), not "max"; a `pids` without `limit`
/// leaves pids.max alone. runc 1.1.5 wrote "max". On cgroup v2 the engine wrote 1 before its
/// intermediate process forked the init, so create failed (seen in the sid guest).
#[test]
fn pids_limit_zero_is_a_real_limit() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 treats 0 as max (RUNC_DIFFERENCES.md)");
    }
    let pids_max = |pids: Value| {
        // The `; exit` keeps sh from exec'ing sleep: it must fork.
        let mut fx = Fixture::new(&["sh", "-c", "sleep 1000; exit 0"]);
        fx.bundle.set("/linux/resources/pids", pids);
        fx.rt.create(&fx.id, &fx.bundle);
        let dir = shim::cgroup_dir(fx.rt.pid(&fx.id), "pids");
        let max = std::fs::read_to_string(dir.join("pids.max")).expect("read pids.max");
        if max.trim() == "1" {
            // sh cannot fork its sleep under pids.max 1: it exits (wait_status polls, bounded).
            fx.rt.start(&fx.id);
            fx.rt.wait_status(&fx.id, "stopped");
        }
        max.trim().to_string()
    };
    assert_eq!(pids_max(json!({"limit": 0})), "1");
    assert_eq!(pids_max(json!({})), "max");
    assert_eq!(pids_max(json!({"limit": 7})), "7");
}

/// `run --keep`: the stopped container stays (state, then `delete`), as runc's.
#[test]
fn run_keep_leaves_the_stopped_container_until_delete() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let fx = Fixture::on(rt, &["sh", "-c", "exit 3"]);
        let out = fx.rt.run(&fx.id, &fx.bundle, &["--keep"], b"");
        assert_eq!(out.code(), 3, "{}", out.describe());
        assert_eq!(fx.status(), "stopped", "{}", fx.rt.bin().display());
        fx.rt.cmd(&["delete", &fx.id]).ok();
        fx.assert_nothing_left();
    }
}

/// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV is known, but the libseccomp we link (2.5.4) cannot
/// set it: refused at create naming the field, not listed in `supportedFlags`.
#[test]
fn seccomp_wait_killable_recv_is_known_and_refused() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 does not know the flag");
    }
    let features = Runtime::under_test().cmd(&["features"]).ok().stdout_json();
    let seccomp = &features["linux"]["seccomp"];
    let flag = "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV";
    assert!(strings(&seccomp["knownFlags"]).iter().any(|f| f == flag), "{seccomp}");
    assert!(!strings(&seccomp["supportedFlags"]).iter().any(|f| f == flag), "{seccomp}");
    let mut fx = Fixture::new(SLEEP);
    fx.bundle.set("/linux/seccomp", json!({"defaultAction": "SCMP_ACT_ALLOW", "flags": [flag]}));
    let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
    assert_one_line_error(&out, &["linux.seccomp.flags[0]"]);
    fx.assert_nothing_left();
}

/// A seccomp architecture a filter here cannot hold (big-endian S390X next to the native
/// x86_64; LOONGARCH64 needs libseccomp 2.6) is refused naming it, not failed in the init with
/// "failed to add arch to seccomp"; `features` does not list it.
#[test]
fn seccomp_architectures_features_omits_are_refused() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc fails these in its init (RUNC_DIFFERENCES.md)");
    }
    let archs = strings(&Runtime::under_test().cmd(&["features"]).ok().stdout_json()["linux"]["seccomp"]["archs"]);
    for arch in ["SCMP_ARCH_S390X", "SCMP_ARCH_LOONGARCH64"] {
        assert!(!archs.contains(arch), "{archs:?}");
        let mut fx = Fixture::new(SLEEP);
        fx.bundle.set("/linux/seccomp", json!({"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", arch]}));
        let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
        assert_one_line_error(&out, &["linux.seccomp.architectures[1]"]);
        fx.assert_nothing_left();
    }
}

/// runc ≥ 1.2's `potentiallyUnsafeConfigAnnotations`, for containerd to filter, and
/// `ociVersionMax` 1.3.0 now that no 1.2/1.3 field is silently ignored.
#[test]
fn features_lists_runcs_potentially_unsafe_annotations() {
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 predates the field");
    }
    let features = Runtime::under_test().cmd(&["features"]).ok().stdout_json();
    assert_eq!(features["ociVersionMax"], "1.3.0", "{features}");
    let listed = strings(&features["potentiallyUnsafeConfigAnnotations"]);
    let runc: std::collections::BTreeSet<String> = ["bundle", "org.systemd.property.", "org.criu.config"].map(String::from).into();
    assert_eq!(listed, runc, "{features}");
}

/// A running `sleep` container whose config has `pointer` set to `value`, on the runtime under
/// test; the kernel's view is read from the host through its init's pid.
fn running_with(settings: &[(&str, Value)]) -> Fixture {
    running_as(SLEEP, settings)
}

fn running_as(args: &[&str], settings: &[(&str, Value)]) -> Fixture {
    let mut fx = Fixture::new(args);
    for (pointer, value) in settings {
        fx.bundle.set(pointer, value.clone());
    }
    fx.rt.start_container(&fx.id, &fx.bundle);
    fx
}

/// Field `index` (1-based, as proc(5) numbers them) of /proc/PID/stat.
fn stat_field(pid: i32, index: usize) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read stat");
    // After the ")" that ends comm, fields start at 3.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    rest.split(' ').nth(index - 3).expect("field").to_string()
}

/// process.scheduler (sched_setattr) and process.ioPriority (ioprio_set), runtime-spec 1.2, as
/// runc ≥ 1.2: the init runs SCHED_BATCH with nice -5 and best-effort I/O priority 3, and with
/// the spec's `SCHED_FLAG_RESET_ON_FORK` (which oci-spec 0.10 spells otherwise) its child
/// starts back at nice 0 (sched(7): a negative nice is reset, SCHED_BATCH is kept).
#[test]
fn scheduler_and_io_priority_reach_the_kernel() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 predates process.scheduler and ioPriority (RUNC_DIFFERENCES.md)");
    }
    // The `; exit` keeps sh from exec'ing sleep: it forks it.
    let fx = running_as(
        &["sh", "-c", "sleep 1000; exit 0"],
        &[
            ("/process/scheduler", json!({"policy": "SCHED_BATCH", "nice": -5, "flags": ["SCHED_FLAG_RESET_ON_FORK"]})),
            ("/process/ioPriority", json!({"class": "IOPRIO_CLASS_BE", "priority": 3})),
        ],
    );
    let pid = fx.rt.pid(&fx.id);
    const SCHED_BATCH: &str = "3";
    assert_eq!(stat_field(pid, 41), SCHED_BATCH, "policy");
    let child = rustpod_tests::wait::wait_for("the init's child", || {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        children.split_whitespace().next()?.parse::<i32>().ok()
    });
    assert_eq!(stat_field(child, 19), "0", "reset on fork: the child's nice");
    assert_eq!(stat_field(pid, 19), "-5", "nice");
    let ionice = rustpod_tests::process::run(std::path::Path::new("/usr/bin/ionice"), &["-p", &pid.to_string()], b"").ok();
    assert_eq!(ionice.stdout.trim(), "best-effort: prio 3");
}

/// A scheduler the kernel refuses (SCHED_FIFO needs a priority from 1 to 99: sched_setattr says
/// EINVAL) fails `create` in one line naming the field, the call and the errno, and leaves
/// nothing: the init's own step reports it through the same channel as the engine's did.
#[test]
fn a_scheduler_the_kernel_refuses_fails_create_and_leaves_nothing() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 predates process.scheduler (RUNC_DIFFERENCES.md)");
    }
    let mut fx = Fixture::new(SLEEP);
    fx.bundle.set("/process/scheduler", json!({"policy": "SCHED_FIFO", "priority": 0}));
    let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
    assert_one_line_error(&out, &["process.scheduler", "sched_setattr", "EINVAL"]);
    fx.assert_nothing_left();
}

/// linux.memoryPolicy (set_mempolicy), runtime-spec 1.3: numa_maps shows the init's policy.
#[test]
fn memory_policy_reaches_the_kernel() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 predates linux.memoryPolicy (RUNC_DIFFERENCES.md)");
    }
    let fx = running_with(&[("/linux/memoryPolicy", json!({"mode": "MPOL_BIND", "nodes": "0"}))]);
    let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", fx.rt.pid(&fx.id))).expect("read numa_maps");
    assert!(maps.lines().any(|l| l.split(' ').nth(1) == Some("bind:0")), "{maps}");
    let features = fx.rt.cmd(&["features"]).ok().stdout_json();
    assert!(strings(&features["linux"]["memoryPolicy"]["modes"]).contains("MPOL_BIND"), "{features}");
}

/// cpu.burst and cpu.idle (runtime-spec 1.2) land in the container's cpu cgroup.
#[test]
fn cpu_burst_and_idle_reach_the_cgroup() {
    skip_if!(needs::containers());
    let mut checked = 0;
    for rt in Runtime::runc_and_under_test() {
        let cpu = json!({"quota": 50000, "period": 100000, "burst": 20000, "idle": 1});
        let mut fx = Fixture::on(rt, SLEEP);
        fx.bundle.set("/linux/resources/cpu", cpu);
        fx.rt.start_container(&fx.id, &fx.bundle);
        let dir = shim::cgroup_dir(fx.rt.pid(&fx.id), "cpu");
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let burst = if dir.join("cpu.max.burst").exists() { "cpu.max.burst" } else { "cpu.cfs_burst_us" };
        let (burst, idle) = (read(burst), read("cpu.idle"));
        eprintln!("{}: burst {} idle {}", fx.rt.bin().display(), burst.trim(), idle.trim());
        // runc 1.1.5 applies neither field: recorded in RUNC_DIFFERENCES.md.
        if env::is_runc(fx.rt.bin()) {
            continue;
        }
        assert_eq!((burst.trim(), idle.trim()), ("20000", "1"));
        checked += 1;
    }
    assert!(checked > 0 || env::testing_runc_itself());
}

/// One end of a veth pair on the host (this kernel has no dummy links), deleted on Drop with
/// its peer, which stays on the host.
struct HostLink(String);

impl HostLink {
    fn new() -> Self {
        let name = format!("rpf{}", std::process::id() % 100_000);
        ip(&["link", "add", &name, "type", "veth", "peer", "name", &format!("{name}p")]).ok();
        HostLink(name)
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &format!("{}p", self.0)]);
    }
}

fn ip(args: &[&str]) -> rustpod_tests::Output {
    rustpod_tests::process::run(std::path::Path::new("/usr/sbin/ip"), args, b"")
}

/// linux.netDevices (runtime-spec 1.3): the host link is moved into the container's network
/// namespace under its new name, with its permanent global address (a documentation address,
/// TEST-NET-1: nothing is sent) and up, as runc moves it. As with runc 1.5 (which has no step
/// moving it back), on
/// delete the kernel returns a physical device to the host and destroys a virtual one with the
/// namespace: a veth's peer goes with it.
#[test]
fn net_devices_move_in_and_go_with_the_namespace() {
    skip_if!(needs::containers());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 predates linux.netDevices (RUNC_DIFFERENCES.md)");
    }
    let link = HostLink::new();
    ip(&["addr", "add", "192.0.2.7/24", "dev", &link.0]).ok();
    let fx = running_with(&[("/linux/netDevices", json!({ &link.0: {"name": "eth7"} }))]);
    let features = fx.rt.cmd(&["features"]).ok().stdout_json();
    assert_eq!(features["linux"]["netDevices"]["enabled"], true, "{features}");
    let pid = fx.rt.pid(&fx.id).to_string();
    let nsenter = std::path::Path::new("/usr/bin/nsenter");
    let inside = rustpod_tests::process::run(nsenter, &["-t", &pid, "-n", "ip", "-j", "addr", "show", "dev", "eth7"], b"").ok();
    let links: Value = serde_json::from_str(&inside.stdout).unwrap_or_else(|e| panic!("ip -j ({e}): {}", inside.stdout));
    let eth7 = &links[0];
    assert!(eth7["flags"].as_array().is_some_and(|f| f.contains(&json!("UP"))), "eth7 is up: {eth7}");
    let addrs: Vec<String> = eth7["addr_info"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or(""), a["prefixlen"]))
        .collect();
    assert!(addrs.contains(&"192.0.2.7/24".to_string()), "the address came along: {eth7}");
    assert!(!ip(&["link", "show", &link.0]).success(), "{} is still on the host", link.0);
    fx.rt.cmd(&["delete", "--force", &fx.id]).ok();
    fx.assert_nothing_left();
    // The kernel destroys a namespace's devices in its cleanup work, after its last process has
    // gone: on a loaded machine, a moment after delete returns (CI run 54).
    let peer_gone = || !ip(&["link", "show", &format!("{}p", link.0)]).success();
    assert!(rustpod_tests::wait::eventually(peer_gone), "the veth outlived its namespace");
}

/// Through containerd too: `pids.limit: 0` gives pids.max 1. runc 1.1.5, the reference, predates
/// it and writes "max" (RUNC_DIFFERENCES.md), so it is printed, not compared. (Idmapped mounts
/// through containerd: mounts_idmap.rs.)
#[test]
fn containerd_paths_apply_pids_limit_zero() {
    skip_if!(shim::blocker());
    if env::testing_runc_itself() {
        skip!("runc 1.1.5 predates it (RUNC_DIFFERENCES.md); the reference path runs it anyway");
    }
    let ctd = ShimContainerd::start();
    let dir = ScratchDir::new("spec13");
    let rootfs = Bundle::new(SLEEP);
    for (path, flags) in shim::paths() {
        let write = |name: &str, spec: &Value| {
            let file = dir.join_str(&format!("{name}.json"));
            std::fs::write(&file, spec.to_string()).expect("write spec");
            file
        };
        let limited = format!("{path}-pids0");
        let mut spec = ctd.oci_spec(&limited, &rootfs.rootfs());
        spec["linux"]["resources"]["pids"] = json!({"limit": 0});
        ctd.run_config(&write(&limited, &spec), &flags, &limited).ok();
        ctd.wait_task(&limited, "RUNNING");
        let (pid, _) = ctd.task(&limited).expect("task listed");
        let max = std::fs::read_to_string(shim::cgroup_dir(pid, "pids").join("pids.max")).expect("read pids.max");
        eprintln!("{path}: pids.limit 0: pids.max {}", max.trim());
        if path != "runc-shim-runc" {
            assert_eq!(max.trim(), "1", "{path}");
        }
    }
}

/// runc 1.5's `update` flags: `--cpu-burst`, `--cpu-idle` and `--pids-limit 0` (runc 1.1.5
/// has neither of the first two and writes max for the third),
/// `--cpu-rt-period`/`--cpu-rt-runtime` (compared with runc), reach the cgroup; the Intel RDT
/// ones are refused in one line on both (neither makes a resctrl group here).
#[test]
fn update_cpu_burst_idle_and_rt_reach_the_cgroup() {
    skip_if!(needs::containers());
    for rt in Runtime::runc_and_under_test() {
        let fx = Fixture::on(rt, SLEEP);
        fx.rt.start_container(&fx.id, &fx.bundle);
        let dir = shim::cgroup_dir(fx.rt.pid(&fx.id), "cpu");
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let bin = fx.rt.bin().display().to_string();
        if dir.join("cpu.rt_period_us").exists() {
            fx.rt.cmd(&["update", "--cpu-rt-period", "900000", "--cpu-rt-runtime", "0", &fx.id]).ok();
            assert_eq!(read("cpu.rt_period_us").trim(), "900000", "{bin}");
        }
        let rdt = fx.rt.cmd(&["update", "--l3-cache-schema", "L3:0=f", &fx.id]);
        assert_one_line_error(&rdt, &["rdt", "l3"]);
        if env::is_runc(fx.rt.bin()) {
            continue;
        }
        let flags = ["update", "--cpu-quota", "50000", "--cpu-period", "100000", "--cpu-burst", "20000", "--cpu-idle", "1"];
        fx.rt.cmd(&[&flags[..], &[fx.id.as_str()]].concat()).ok();
        let burst = if dir.join("cpu.max.burst").exists() { "cpu.max.burst" } else { "cpu.cfs_burst_us" };
        assert_eq!((read(burst).trim(), read("cpu.idle").trim()), ("20000", "1"));
        // runc ≥ 1.4: `--pids-limit 0` is a limit of 0, not max.
        fx.rt.cmd(&["update", "--pids-limit", "0", &fx.id]).ok();
        let pids = shim::cgroup_dir(fx.rt.pid(&fx.id), "pids").join("pids.max");
        assert_eq!(std::fs::read_to_string(pids).expect("read pids.max").trim(), "1");
    }
}

/// `memory.checkBeforeUpdate` (runtime-spec 1.2) on cgroup v2, as runc: an update below what
/// the container already uses (20 MiB in /dev/shm) is refused in one line and memory.max stays;
/// without the check it is written. (cgroup v1's kernel refuses such a limit itself.)
#[test]
fn memory_check_before_update_refuses_a_limit_below_usage() {
    skip_if!(needs::containers());
    skip_if!(needs::cgroup_v2(&["memory"]));
    for rt in Runtime::runc_and_under_test() {
        let mut fx = Fixture::on(rt, &["sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1M count=20 && sleep 1000"]);
        fx.bundle.set("/linux/resources/memory", json!({"limit": 256 << 20}));
        fx.rt.start_container(&fx.id, &fx.bundle);
        let dir = shim::cgroup_dir(fx.rt.pid(&fx.id), "memory");
        rustpod_tests::wait::wait_for("20 MiB charged", || {
            let current: u64 = std::fs::read_to_string(dir.join("memory.current")).ok()?.trim().parse().ok()?;
            (current > 20 << 20).then_some(())
        });
        let update = json!({"memory": {"limit": 4 << 20, "checkBeforeUpdate": true}}).to_string();
        let out = fx.rt.cmd_stdin(&["update", "--resources", "-", &fx.id], update.as_bytes());
        if env::is_runc(fx.rt.bin()) {
            // runc 1.3 also warns that setting the old values back failed: two lines.
            assert!(!out.success() && out.stderr.contains("rejecting memory limit"), "{}", out.describe());
        } else {
            assert_one_line_error(&out, &["rejecting memory limit"]);
        }
        let max = std::fs::read_to_string(dir.join("memory.max")).expect("read memory.max");
        assert_eq!(max.trim(), (256u64 << 20).to_string(), "{}", fx.rt.bin().display());
    }
}

/// Why hugetlb limits cannot reach a container's cgroup here: no 2MB huge pages, or a hybrid
/// host whose hugetlb controller is only on the unified hierarchy (v1 runtimes have no hugetlb
/// hierarchy to use there, so runc and rustpod both refuse the limits).
fn hugetlb_unreachable() -> Option<String> {
    if !std::path::Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB").is_dir() {
        return Some("no 2MB huge pages on this kernel".into());
    }
    let v1 = needs::cgroup_v1("hugetlb").is_none();
    let unified = nix::sys::statfs::statfs("/sys/fs/cgroup").is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC);
    let offered = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    let v2 = unified && offered.split_whitespace().any(|c| c == "hugetlb");
    (!v1 && !v2).then(|| "no hugetlb v1 hierarchy, and not a v2 host offering hugetlb".into())
}

/// `hugepageLimits`: the limit goes to `hugetlb.2MB.limit_in_bytes` (v1) or `.max` (v2), and,
/// as runc >= 1.2 does, to the reservation limit `hugetlb.2MB.rsvd.*` too (kernel >= 5.7), so
/// a mapping cannot reserve past the limit and fault later. Where hugetlb cannot reach the
/// cgroup (this hybrid host), the limits are refused at create naming hugetlb, as runc refuses
/// them, and nothing is left. Next to runc 1.1.5 on the host and runc 1.3.6/crun in the guest.
#[test]
fn hugepage_limits_set_the_reservation_limit_too() {
    skip_if!(needs::containers());
    const LIMIT: u64 = 4 * 1024 * 1024;
    let unreachable = hugetlb_unreachable();
    for rt in Runtime::runc_and_under_test() {
        let mut fx = Fixture::on(rt, SLEEP);
        fx.bundle.set("/linux/resources/hugepageLimits", json!([{"pageSize": "2MB", "limit": LIMIT}]));
        if let Some(why) = &unreachable {
            eprintln!("{}: {why}: the limits must be refused", fx.rt.bin().display());
            let out = fx.rt.try_create(&fx.id, &fx.bundle, &[]);
            assert_one_line_error(&out, &["hugetlb"]);
            fx.assert_nothing_left();
            continue;
        }
        fx.rt.start_container(&fx.id, &fx.bundle);
        let dir = shim::cgroup_dir(fx.rt.pid(&fx.id), "hugetlb");
        let v1 = dir.join("hugetlb.2MB.limit_in_bytes").exists();
        let (limit, rsvd) = if v1 {
            ("hugetlb.2MB.limit_in_bytes", "hugetlb.2MB.rsvd.limit_in_bytes")
        } else {
            ("hugetlb.2MB.max", "hugetlb.2MB.rsvd.max")
        };
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("read {}/{file}: {e}", dir.display()));
        let held = (read(limit).trim().to_string(), read(rsvd).trim().to_string());
        eprintln!("{}: {limit} {} {rsvd} {}", fx.rt.bin().display(), held.0, held.1);
        // crun 1.28 and runc before 1.2 leave the reservation limit at max (RUNC_DIFFERENCES.md).
        let bin = fx.rt.bin();
        let oracle_without_rsvd = env::is_runc(bin) && (bin.ends_with("crun") || env::version_of(bin) < (1, 2, 0));
        let want_rsvd = if oracle_without_rsvd { held.1.clone() } else { LIMIT.to_string() };
        assert_eq!(held, (LIMIT.to_string(), want_rsvd), "{}: (limit, rsvd)", bin.display());
    }
}

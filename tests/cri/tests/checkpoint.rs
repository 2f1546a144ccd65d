// CRI CheckpointContainer on containerd 2.x (what kubelet's container checkpoint API calls): the
// archive containerd writes at the location (criu's images under checkpoint/, config.dump,
// spec.dump, status.dump, criu's stats-dump, the rootfs diff), and the container still running
// and counting afterwards (kubelet's checkpoint leaves it running). For runc and for our shim
// under the runc-typed handler (`rustpod-runc-v2`), the one containerd passes its work path to;
// needs a criu that passes `criu check` (the sid guest's 4.2.1).

use std::path::{Path, PathBuf};

use rustpod_cri_tests::cri::ContainerState;
use rustpod_cri_tests::registry::Registry;
use rustpod_cri_tests::{blocker_on, container, containerd2, pod_config, Cri, BUSYBOX, NAMESPACE};
use rustpod_tests::{leftovers, needs, process, skip, wait};

/// One criu dump at a time: under the sid guest's emulated CPUs two at once can overrun criu's
/// freeze timeout.
fn criu_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A containerd 2.x CRI with criu usable, or why not.
fn containerd2_cri() -> Result<Cri, String> {
    let containerd =
        containerd2().ok_or("neither RUSTPOD_CRI_CONTAINERD nor RUSTPOD_CONTAINERD is set (containerd 2.x; hack/test.sh sets sid's)")?;
    if let Some(why) = blocker_on(Some(&containerd)).or_else(needs::criu) {
        return Err(why);
    }
    Ok(Cri::start_on(Some(&containerd)))
}

macro_rules! containerd2_cri_or_skip {
    () => {
        match containerd2_cri() {
            Ok(cri) => cri,
            Err(why) => skip!("{why}"),
        }
    };
}

/// The counter's last complete value in the container's /tmp, read through ExecSync. The
/// counter appends: with `>`, a read between the truncate and the write would find nothing.
fn count(cri: &Cri, id: &str) -> u64 {
    let read = cri.sh(id, "cat /tmp/n");
    assert_eq!(read.code, 0, "cat /tmp/n in {id} (handler {}): {read:?}", cri.handler);
    let text = read.stdout;
    let complete = &text[..text.rfind('\n').unwrap_or(0)];
    let last = complete.lines().last().unwrap_or_default();
    last.trim().parse().unwrap_or_else(|e| panic!("counter's last line {last:?} of {} bytes: {e}", text.len()))
}

/// Waits (bounded) for the counter to pass `after`: the container's processes run.
fn counts_past(cri: &Cri, id: &str, after: u64) {
    wait::wait_for(&format!("{id}'s counter to pass {after} (handler {})", cri.handler), || (count(cri, id) > after).then_some(()));
}

/// The counter: appends 1, 2, 3… to /tmp/n (in its rootfs), one a second.
const COUNTER: &str = "i=0; while true; do i=$((i+1)); echo $i >> /tmp/n; sleep 1; done";

/// A pod under `handler` running a counter of image `image`; returns the pod's id and the
/// container's.
fn counter_pod(cri: &Cri, handler: &str, image: &str) -> (String, String) {
    let pod_cfg = pod_config(&format!("checkpoint-{handler}"));
    let pod = cri.run_pod_with(&pod_cfg, handler).unwrap_or_else(|e| panic!("RunPodSandbox (handler {handler}): {e}"));
    let mut c = container("counter", COUNTER);
    c.image.as_mut().expect("an image spec").image = image.into();
    let id = cri.run_container(&pod, &c, &pod_cfg);
    counts_past(cri, &id, 0);
    (pod, id)
}

/// A pod under `handler` running a counter; returns the container id.
fn counter_under(cri: &Cri, handler: &str) -> String {
    counter_pod(cri, handler, BUSYBOX).1
}

/// The archive unpacked under `dir`.
fn unpack(archive: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let out = process::run(Path::new("tar"), &["-xf", &archive.display().to_string(), "-C", &dir.display().to_string()], b"");
    assert!(out.success(), "unpack {}: {}", archive.display(), out.describe());
}

fn json_file(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checkpoints a running counter under `handler` and checks the archive and that it runs on.
fn checkpoint_leaves_it_running(handler: &str) {
    let cri = containerd2_cri_or_skip!();
    let id = counter_under(&cri, handler);
    let pid = cri.container_pid(&id);
    let archive: PathBuf = cri.dir().join(format!("checkpoint-{handler}.tar"));
    let turn = criu_turn();
    cri.checkpoint(&id, &archive).unwrap_or_else(|e| panic!("CheckpointContainer (handler {handler}): {e}"));

    drop(turn);
    let dir = cri.dir().join(format!("unpacked-{handler}"));
    unpack(&archive, &dir);
    for file in ["checkpoint/inventory.img", "checkpoint/pstree.img", "stats-dump", "rootfs-diff.tar", "status.dump"] {
        assert!(dir.join(file).is_file(), "handler {handler}: no {file} in the archive");
    }
    let config = json_file(&dir.join("config.dump"));
    assert_eq!(config["id"], id.as_str(), "handler {handler}: config.dump {config}");
    let spec = json_file(&dir.join("spec.dump"));
    let args = spec["process"]["args"].to_string();
    assert!(args.contains(COUNTER), "handler {handler}: spec.dump's args {args}");

    // Left running: the same process, still counting.
    assert_eq!(cri.state(&id), ContainerState::ContainerRunning, "handler {handler}");
    assert_eq!(cri.container_pid(&id), pid, "handler {handler}: the init was replaced");
    let before = count(&cri, &id);
    counts_past(&cri, &id, before);
}

#[test]
fn checkpoint_container_runc() {
    checkpoint_leaves_it_running("runc");
}

#[test]
fn checkpoint_container_our_shim_runc_typed() {
    checkpoint_leaves_it_running("rustpod-runc-v2");
}

/// Our shim under its own runtime type (`rustpod`, io.containerd.rustpod.v1), to which
/// containerd 2.1 passes no checkpoint options (criu works in the image path; the container is
/// left running, the runc shim's default too). In the sid guest CheckpointContainer answered OK
/// here; the archive and the running-on checks have not yet run there, so this test is not in
/// hack/guest/sid-tests.list yet.
#[test]
fn checkpoint_container_our_shim_own_type() {
    checkpoint_leaves_it_running("rustpod");
}

/// Every complete line of the counter's file in container `id`, as numbers.
fn lines(cri: &Cri, id: &str) -> Vec<u64> {
    let read = cri.sh(id, "cat /tmp/n");
    assert_eq!(read.code, 0, "cat /tmp/n in {id} (handler {}): {read:?}", cri.handler);
    let complete = &read.stdout[..read.stdout.rfind('\n').map_or(0, |i| i + 1)];
    complete.lines().map(|l| l.trim().parse().unwrap_or_else(|e| panic!("counter line {l:?} in {id}: {e}"))).collect()
}

/// The counter's lines are 1, 2, … n with none missing or repeated: the rootfs diff kept what it
/// had written and the restored shell went on from its own `i` (a restart would write 1 again,
/// a lost diff would start past 1).
fn assert_counted_on(lines: &[u64], what: &str) {
    let expected: Vec<u64> = (1..=lines.len() as u64).collect();
    assert!(!lines.is_empty(), "{what}: /tmp/n is empty");
    assert_eq!(lines, expected.as_slice(), "{what}: the counter did not go on from where it was");
}

/// A container config that restores from `archive`: its image is the archive's path, as kubelet
/// passes a checkpoint archive to CreateContainer.
fn restored_from(archive: &Path) -> rustpod_cri_tests::cri::ContainerConfig {
    let mut c = container("counter", COUNTER);
    c.image.as_mut().expect("an image spec").image = archive.display().to_string();
    c
}

/// Busybox as a registry serves it: containerd 2.1's CRI restore pulls the archive's base image
/// by the checkpointed container's CRI ImageRef (config.dump's `rootfsImageRef`) before anything
/// else, and that is a repo digest only for an image with one (as PullImage records them; the
/// harness's `ctr images import` records none, and an image id cannot be pulled). So busybox is
/// named `127.0.0.1:PORT/busybox:latest` and `…@<its manifest digest>` here, with a registry on
/// that port serving containerd's own content store. Returns the registry (serving until
/// dropped), the tag name to run containers of and the digest name.
fn busybox_from_a_registry(cri: &Cri) -> (Registry, String, String) {
    let listed = cri.ctr(&["images", "ls"]);
    assert!(listed.success(), "ctr images ls: {}", listed.describe());
    let line = listed.stdout.lines().find(|l| l.split_whitespace().next() == Some(BUSYBOX));
    let words: Vec<&str> = line.unwrap_or_else(|| panic!("no {BUSYBOX} in {}", listed.stdout)).split_whitespace().collect();
    let (manifest_type, digest) = (words[1], words[2]);
    let registry = Registry::serve(&cri.dir().join("root/io.containerd.content.v1.content/blobs"), manifest_type);
    let (tag, by_digest) = (format!("{}/busybox:latest", registry.host()), format!("{}/busybox@{digest}", registry.host()));
    for name in [&tag, &by_digest] {
        let tagged = cri.ctr(&["images", "tag", BUSYBOX, name]);
        assert!(tagged.success(), "ctr images tag {BUSYBOX} {name}: {}", tagged.describe());
    }
    (registry, tag, by_digest)
}

/// Checkpoints a counter under `handler`, removes its pod, and restores the archive through
/// CreateContainer (the archive as the image) and StartContainer in a new pod: the container
/// runs, CRI says it was restored, and the counter goes on from where it was.
fn restore_counts_on(handler: &str) {
    let cri = containerd2_cri_or_skip!();
    let (_registry, image, _) = busybox_from_a_registry(&cri);
    let (pod, id) = counter_pod(&cri, handler, &image);
    let archive: PathBuf = cri.dir().join(format!("restore-{handler}.tar"));
    let before = count(&cri, &id);
    {
        let _turn = criu_turn();
        cri.checkpoint(&id, &archive).unwrap_or_else(|e| panic!("CheckpointContainer (handler {handler}): {e}"));
    }
    // The original is gone: the restore has only the archive to go on.
    cri.stop_pod(&pod).unwrap_or_else(|e| panic!("StopPodSandbox (handler {handler}): {e}"));
    cri.remove_pod(&pod).unwrap_or_else(|e| panic!("RemovePodSandbox (handler {handler}): {e}"));

    let pod_cfg = pod_config(&format!("restored-{handler}"));
    let new_pod = cri.run_pod_with(&pod_cfg, handler).unwrap_or_else(|e| panic!("RunPodSandbox (handler {handler}): {e}"));
    let restored = cri
        .create_container(&new_pod, &restored_from(&archive), &pod_cfg)
        .unwrap_or_else(|e| panic!("CreateContainer from {} (handler {handler}): {e}", archive.display()));
    assert_ne!(restored, id, "handler {handler}: a new container");
    {
        let _turn = criu_turn();
        cri.start_container(&restored).unwrap_or_else(|e| panic!("StartContainer of the restore (handler {handler}): {e}"));
    }
    assert_eq!(cri.state(&restored), ContainerState::ContainerRunning, "handler {handler}");
    let annotations = cri.status(&restored).annotations;
    assert_eq!(annotations.get("restored").map(String::as_str), Some("true"), "handler {handler}: {annotations:?}");
    // Confined as the new container, not as the one checkpointed: its init is in a cgroup named
    // for the restored container, and no cgroup of the old one came back with it (criu puts a
    // tree back where it was dumped from unless told the new root, as runc tells it).
    let pid = cri.container_pid(&restored);
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_else(|e| panic!("read /proc/{pid}/cgroup: {e}"));
    assert!(cgroup.contains(&restored), "handler {handler}: the restored init {pid} is in {cgroup}, not a cgroup of {restored}");
    let stale = cgroups_named(Path::new("/sys/fs/cgroup"), &id, 8);
    assert!(stale.is_empty(), "handler {handler}: the restore brought back the checkpointed container's cgroups {stale:?}");

    let first = lines(&cri, &restored);
    assert_counted_on(&first, &format!("handler {handler}, just restored"));
    let last = *first.last().expect("not empty");
    assert!(last >= before, "handler {handler}: restored at {last}, but the original had counted to {before} before its checkpoint");
    counts_past(&cri, &restored, last);
    assert_counted_on(&lines(&cri, &restored), &format!("handler {handler}, counting after the restore"));
}

#[test]
fn restore_container_runc() {
    restore_counts_on("runc");
}

#[test]
fn restore_container_our_shim_runc_typed() {
    restore_counts_on("rustpod-runc-v2");
}

#[test]
fn restore_container_our_shim_own_type() {
    restore_counts_on("rustpod");
}

/// A tar of `files` (name, content) and of the empty directories `dirs`, at `archive`.
fn tar_of(archive: &Path, files: &[(&str, &str)], dirs: &[&str]) {
    let src = archive.with_extension("d");
    std::fs::create_dir_all(&src).unwrap_or_else(|e| panic!("mkdir {}: {e}", src.display()));
    for (name, content) in files {
        let path = src.join(name);
        std::fs::write(&path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
    for dir in dirs {
        let path = src.join(dir);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
    }
    let mut args = vec!["-cf".to_string(), archive.display().to_string(), "-C".into(), src.display().to_string()];
    args.extend(files.iter().map(|(n, _)| n.to_string()));
    args.extend(dirs.iter().map(|d| d.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = process::run(Path::new("tar"), &args, b"");
    assert!(out.success(), "tar {}: {}", archive.display(), out.describe());
}

/// What container `id`'s failed restore left: a task, a mount under its bundle, a process
/// naming it, a cgroup named for it, a state dir in our shim's or the runc shim's root.
fn left_behind(cri: &Cri, id: &str) -> Vec<String> {
    let mut left = Vec::new();
    let tasks = cri.ctr(&["tasks", "ls", "-q"]);
    if tasks.stdout.lines().any(|l| l.trim() == id) {
        left.push(format!("task {id}"));
    }
    let bundle = cri.task_dir(id).display().to_string();
    left.extend(leftovers::mounts_under(&bundle));
    left.extend(leftovers::processes_under(&bundle));
    left.extend(cgroups_named(Path::new("/sys/fs/cgroup"), id, 8).into_iter().map(|d| format!("cgroup {}", d.display())));
    for root in [cri.dir().join("state/rustpod").join(NAMESPACE), Path::new("/run/containerd/runc").join(NAMESPACE)] {
        let state = root.join(id);
        if state.exists() {
            left.push(format!("state dir {}", state.display()));
        }
    }
    left
}

/// Cgroup directories under `dir` (at most `depth` levels down) whose name holds `id`.
fn cgroups_named(dir: &Path, id: &str, depth: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name().to_string_lossy().contains(id) {
            found.push(path.clone());
        }
        if depth > 0 {
            found.extend(cgroups_named(&path, id, depth - 1));
        }
    }
    found
}

/// Bad archives given to CreateContainer as the image, on each handler (our shim, and runc as
/// the reference): a path with nothing there, a tar that is no checkpoint, and one with
/// containerd's metadata but no criu images (CreateContainer takes it; StartContainer's restore
/// fails in the shim). Each fails with the same gRPC code on both, and nothing is left: no
/// container for the first two, and for the third no task, mount, process, cgroup or state dir
/// (the container stays, exited, until RemoveContainer, as for any failed start).
#[test]
fn restore_from_a_bad_archive_fails_alike_and_leaves_nothing() {
    let mut cri = containerd2_cri_or_skip!();
    let (_registry, image, by_digest) = busybox_from_a_registry(&cri);
    let codes = cri.same_on_each_handler(|cri| {
        let handler = cri.handler.clone();
        let pod_cfg = pod_config(&format!("bad-restore-{handler}"));
        let pod = cri.run_pod_ok(&pod_cfg);
        let missing = cri.dir().join(format!("never-written-{handler}.tar"));
        let no_checkpoint = cri.dir().join(format!("no-checkpoint-{handler}.tar"));
        tar_of(&no_checkpoint, &[("notes.txt", "not a checkpoint\n")], &[]);
        let mut seen = Vec::new();
        for (what, archive) in [("a missing archive", &missing), ("a tar that is no checkpoint", &no_checkpoint)] {
            let before = cri.list_containers().len();
            let created = cri.create_container(&pod, &restored_from(archive), &pod_cfg);
            let code = created.err().unwrap_or_else(|| panic!("handler {handler}: CreateContainer took {what}")).code();
            assert_eq!(cri.list_containers().len(), before, "handler {handler}: {what} left a container");
            seen.push((what, code));
        }

        let no_images = cri.dir().join(format!("no-images-{handler}.tar"));
        let config = format!(r#"{{"id":"gone-{handler}","name":"counter","rootfsImageName":"{image}","rootfsImageRef":"{by_digest}"}}"#);
        let status = format!(r#"{{"metadata":{{"name":"counter"}},"image":{{"image":"{image}"}}}}"#);
        let spec = r#"{"ociVersion":"1.2.0"}"#;
        tar_of(&no_images, &[("config.dump", &config), ("status.dump", &status), ("spec.dump", spec)], &["checkpoint"]);
        let id = cri
            .create_container(&pod, &restored_from(&no_images), &pod_cfg)
            .unwrap_or_else(|e| panic!("handler {handler}: CreateContainer of an archive with metadata: {e}"));
        let started = {
            let _turn = criu_turn();
            cri.start_container(&id)
        };
        let code = started.err().unwrap_or_else(|| panic!("handler {handler}: restored from no criu images")).code();
        seen.push(("a checkpoint without criu images", code));
        assert_eq!(cri.state(&id), ContainerState::ContainerExited, "handler {handler}: after the failed restore");
        if !wait::eventually(|| left_behind(cri, &id).is_empty()) {
            panic!("handler {handler}: the failed restore of {id} left:\n  {}", left_behind(cri, &id).join("\n  "));
        }
        cri.remove_container(&id).unwrap_or_else(|e| panic!("handler {handler}: RemoveContainer after the failed restore: {e}"));
        seen
    });
    eprintln!("codes: {codes:?}");
    assert_eq!(codes.last().map(|(_, c)| *c), Some(tonic::Code::Unknown), "the runc shim's code for a failed restore");
}

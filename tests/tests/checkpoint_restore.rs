// checkpoint and restore with criu, each scenario on runc ($RUNC_BIN) and then on the runtime
// under test: a counter checkpointed, restored and counting on from where it was (contest's
// checkpoint_restore shape, with a host bind mount it writes through), --leave-running, runc's
// iterative migration (--pre-dump, then a dump with --parent-path, restored), a dump to a criu
// page server, lazy migration (--lazy-pages), and the refusals (a
// container that is not running, a missing image path, a bad --parent-path, criu missing or
// failing its `criu check`) that leave nothing behind; through containerd 2.x the same on each shim path,
// restores included. The round trips need a criu that passes `criu check` (the sid guest's
// 4.2.1 on kernel 7.2); where it does not (this host: criu missing, or Debian 12's 3.17.1
// failing on kernel 6.18) they skip loudly; `features` claims checkpointing as runc does.

use std::path::Path;
use std::process::{Command, Stdio};

use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{env, json, skip, skip_if, wait, Bundle, Runtime};

/// Counts in memory and appends each value to the bind-mounted /data: a restarted shell would
/// start again from 1, a restored one goes on. Appending, not `>`: a checkpoint taken between
/// `>`'s truncate and its write would leave no value to compare with.
/// It also holds 1 MiB it never writes again (`b`): the few pages the loop dirties are then far
/// fewer than all it has, so a dump that tracks memory since a pre-dump writes visibly less.
const COUNTER: &[&str] =
    &["sh", "-c", "b=$(head -c 1048576 /dev/zero | tr '\\0' x); i=0; while true; do i=$((i+1)); echo $i >> /data/count; sleep 0.1; done"];

/// The counter's last complete value in `text` (a line not yet ended may be half written).
fn last_count(text: &str) -> Option<u64> {
    let complete = &text[..text.rfind('\n')?];
    complete.lines().last()?.trim().parse().ok()
}

/// One criu dump or restore at a time in this file: under the sid guest's emulated CPUs two at
/// once can overrun criu's freeze timeout (runc's and ours alike fail then).
fn criu_turn() -> std::sync::MutexGuard<'static, ()> {
    static CRIU: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CRIU.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `round` on runc ($RUNC_BIN), then on the runtime under test, each with its name.
fn each_runtime(mut round: impl FnMut(&Runtime, &str)) {
    for rt in Runtime::runc_and_under_test() {
        round(&rt, &rt.bin().display().to_string());
    }
}

/// Why a checkpoint/restore round trip cannot run here: no containers, or no working criu.
fn round_trip_blocker() -> Option<String> {
    rustpod_tests::needs::containers().or_else(rustpod_tests::needs::criu)
}

/// A bundle running the counter with a host directory bind-mounted at /data, in the host's
/// network namespace: criu locks a network namespace it dumps with iptables-restore, which the
/// sid guest does not have (runc fails there the same way); a pod's joined netns is external.
fn counter_bundle(data: &ScratchDir) -> Bundle {
    let mut bundle = Bundle::new(COUNTER);
    bundle.add_mount(json!({
        "destination": "/data", "type": "bind", "source": data.str(), "options": ["rbind", "rw"]
    }));
    let namespaces: Vec<_> = bundle.config()["linux"]["namespaces"]
        .as_array()
        .expect("the test spec lists namespaces")
        .iter()
        .filter(|ns| ns["type"] != "network")
        .cloned()
        .collect();
    bundle.set("/linux/namespaces", json!(namespaces));
    bundle
}

/// The runtime with its stdio (and so the container's) on /dev/null: criu restores the init's
/// files, and the harness's usual stdio files live outside the container.
fn detached(rt: &Runtime, args: &[&str]) -> (bool, String) {
    let mut full = vec!["--root", rt.root()];
    full.extend_from_slice(args);
    let status = Command::new(rt.bin())
        .args(&full)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("run {}: {e}", rt.bin().display()));
    (status.success(), format!("{} {} exited {status}", rt.bin().display(), full.join(" ")))
}

fn read_count(data: &ScratchDir) -> Option<u64> {
    last_count(&std::fs::read_to_string(data.join("count")).ok()?)
}

fn wait_count_at_least(data: &ScratchDir, n: u64) -> u64 {
    wait::wait_for(&format!("the counter to reach {n}"), || read_count(data).filter(|c| *c >= n))
}

/// A running counter container with its host /data and a directory for its images.
struct Counter {
    data: ScratchDir,
    images: ScratchDir,
    bundle: Bundle,
    id: String,
}

impl Counter {
    /// create + start with stdio on /dev/null; waits until it has counted a while.
    fn start(rt: &Runtime) -> Self {
        let data = ScratchDir::new("cr-data");
        let bundle = counter_bundle(&data);
        let id = rt.new_id("cr");
        bundle.prepare(&id);
        let (ok, what) = detached(rt, &["create", "--bundle", bundle.path(), &id]);
        assert!(ok, "{what}");
        rt.start(&id);
        wait_count_at_least(&data, 20);
        Counter { data, images: ScratchDir::new("cr-images"), bundle, id }
    }

    /// `checkpoint` (which must succeed) into `<images>/img`, with `flags`; the image path.
    fn checkpoint(&self, rt: &Runtime, flags: &[&str]) -> String {
        let image_path = self.images.join_str("img");
        checkpoint(rt, &[flags, &["--image-path", &image_path]].concat(), &image_path, &self.id);
        image_path
    }
}

/// A counter checkpointed without `--leave-running`: its parts, its images and the count it had
/// reached.
struct Checkpointed {
    data: ScratchDir,
    images: ScratchDir,
    bundle: Bundle,
    id: String,
    image_path: String,
    at_checkpoint: u64,
}

impl Counter {
    /// `checkpoint` into `<images>/img`; as runc's checkpoint destroys it, the container is gone
    /// and its tree with it, and the images hold descriptors.json.
    fn checkpoint_away(self, rt: &Runtime, name: &str) -> Checkpointed {
        self.checkpoint_away_with(rt, name, &[])
    }

    /// `checkpoint_away` with more `flags` (a `--parent-path`).
    fn checkpoint_away_with(self, rt: &Runtime, name: &str, flags: &[&str]) -> Checkpointed {
        let old_pid = rt.pid(&self.id);
        let image_path = self.checkpoint(rt, flags);
        assert!(rt.try_status(&self.id).is_none(), "{name}: state must fail after checkpoint: the container is gone");
        assert!(
            wait::eventually(|| !Path::new(&format!("/proc/{old_pid}")).exists()),
            "{name}: the checkpointed init {old_pid} must be gone"
        );
        assert!(Path::new(&image_path).join("descriptors.json").exists(), "{name}: no descriptors.json in the images");
        let at_checkpoint = read_count(&self.data).expect("the counter wrote /data/count");
        let Counter { data, images, bundle, id } = self;
        Checkpointed { data, images, bundle, id, image_path, at_checkpoint }
    }
}

/// criu gives up freezing a tree after its default 10 s while a task stays in D state
/// ("Timeout reached", "Unseizable non-zombie … state D"), which the sid guest's TCG slowness
/// causes for runc and for us alike; runc has no flag for criu's timeout. So a dump that failed
/// on exactly that is run again, at most three times in all; any other failure is returned at
/// once. A failed dump leaves the container running, for runc as for us.
fn dump_retrying_criu_freeze_timeouts(
    images: &str,
    mut dump: impl FnMut() -> rustpod_tests::process::Output,
) -> rustpod_tests::process::Output {
    // runc names criu's log instead of quoting it: read the one in the images or the one named.
    let timed_out = |out: &rustpod_tests::process::Output| {
        let named = out.stderr.split(|c: char| c.is_whitespace() || c == '"').filter(|word| word.ends_with("dump.log"));
        criu_froze_too_long(&out.stderr, std::iter::once(format!("{images}/dump.log")).chain(named.map(str::to_string)))
    };
    for _ in 1..3 {
        let out = dump();
        if out.success() || !timed_out(&out) {
            return out;
        }
        eprintln!("criu's freeze timed out; dumping again: {}", out.stderr.trim());
        let _ = std::fs::remove_file(Path::new(images).join("dump.log"));
    }
    dump()
}

/// Whether a dump ended on criu's freeze timeout, by the runtime's stderr or criu's `logs`.
fn criu_froze_too_long(stderr: &str, logs: impl IntoIterator<Item = String>) -> bool {
    stderr.contains("Timeout reached")
        || logs.into_iter().any(|log| std::fs::read_to_string(log).is_ok_and(|text| text.contains("Timeout reached")))
}

/// criu's errors and warnings from the dump.log in `dir`.
fn criu_errors(dir: &str) -> String {
    let log = std::fs::read_to_string(Path::new(dir).join("dump.log")).unwrap_or_default();
    log.lines().filter(|l| l.contains("Error") || l.contains("Warn")).collect::<Vec<_>>().join("\n")
}

/// `checkpoint FLAGS --image-path IMAGES [--work-path …] id`, which must succeed; on failure
/// criu's own errors from its log (in `work`) go into the panic.
fn checkpoint(rt: &Runtime, flags: &[&str], work: &str, id: &str) {
    let out = dump_retrying_criu_freeze_timeouts(work, || rt.cmd(&[&["checkpoint"][..], flags, &[id]].concat()));
    if !out.success() {
        panic!("{}\ncriu's log in {work}:\n{}", out.describe(), criu_errors(work));
    }
}

/// SIGKILL, delete, and nothing of the container left.
fn kill_and_delete(rt: &Runtime, id: &str, bundle: &Bundle) {
    rt.kill(id, "KILL");
    rt.wait_status(id, "stopped");
    rt.delete(id);
    rt.assert_nothing_left(id, bundle.path());
}

#[test]
fn counter_continues_after_checkpoint_and_restore() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        restore_and_count_on(rt, name, Counter::start(rt).checkpoint_away(rt, name));
    });
}

/// `restore --detach --pid-file` of a checkpointed counter: it runs with a new pid (the one in
/// the pid file) and counts on from where it was; then it is killed and deleted.
fn restore_and_count_on(rt: &Runtime, name: &str, checkpointed: Checkpointed) {
    let Checkpointed { data, images, bundle, id, image_path, at_checkpoint } = checkpointed;
    let pid_file = images.join_str("restored.pid");
    let restore = ["restore", "--detach", "--image-path", &image_path, "--pid-file", &pid_file, "--bundle", bundle.path(), &id];
    let (ok, what) = detached(rt, &restore);
    assert!(ok, "{name}: {what}");
    assert_eq!(rt.status(&id), "running", "{name}: restored container's state");
    let new_pid = rt.pid(&id);
    assert!(new_pid > 0, "{name}: restored state has no pid");
    let written = std::fs::read_to_string(&pid_file).unwrap_or_default();
    assert_eq!(written.trim(), new_pid.to_string(), "{name}: --pid-file holds the restored init");
    // The restored shell's own memory: its first new value follows the last one; a
    // restarted shell would write 1, 2, 3… (far below: it counted to 20 first).
    let first = wait::wait_for("the restored counter to write", || read_count(&data).filter(|c| *c != at_checkpoint));
    assert!(first > at_checkpoint, "{name}: the counter restarted: {first} after {at_checkpoint}");
    wait_count_at_least(&data, first + 3);
    kill_and_delete(rt, &id, &bundle);
}

/// The bytes of criu's page images (`pages-*.img`) in `dir`.
fn page_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read directory {}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("pages-"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// `checkpoint --pre-dump` into `<images>/<dir>` (with more `flags`), which must succeed, and
/// leaves the container running: the same init, counting on; a pre-dump records memory only
/// (no descriptors.json, as runc).
fn pre_dump(rt: &Runtime, name: &str, counter: &Counter, dir: &str, flags: &[&str]) {
    let pid = rt.pid(&counter.id);
    let path = counter.images.join_str(dir);
    checkpoint(rt, &[&["--pre-dump", "--image-path", &path][..], flags].concat(), &path, &counter.id);
    assert_eq!(rt.status(&counter.id), "running", "{name}: a pre-dump leaves the container running");
    assert_eq!(rt.pid(&counter.id), pid, "{name}: a pre-dump keeps the same init");
    let now = read_count(&counter.data).expect("the counter wrote /data/count");
    wait_count_at_least(&counter.data, now + 2);
    assert!(page_bytes(Path::new(&path)) > 0, "{name}: the pre-dump wrote no page images in {path}");
    assert!(!Path::new(&path).join("descriptors.json").exists(), "{name}: a pre-dump writes no descriptors.json");
}

/// runc's iterative migration: `checkpoint --pre-dump` into `parent` (the container runs on),
/// then `checkpoint --parent-path ../parent` into `img`: criu links `img/parent` to it and,
/// tracking memory since the pre-dump, writes fewer pages than the pre-dump did (a dump that
/// did not track memory would write them all again); `restore` from `img` (criu reading the
/// unchanged pages from the parent) and the counter goes on from where it was.
#[test]
fn pre_dump_then_dump_on_its_parent_restores_the_counter() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        let counter = Counter::start(rt);
        pre_dump(rt, name, &counter, "parent", &[]);
        let parent = counter.images.join("parent");
        let checkpointed = counter.checkpoint_away_with(rt, name, &["--parent-path", "../parent"]);
        let img = Path::new(&checkpointed.image_path);
        let link = std::fs::read_link(img.join("parent")).unwrap_or_else(|e| panic!("{name}: {}/parent: {e}", img.display()));
        assert_eq!(link, Path::new("../parent"), "{name}: criu links the dump to its parent");
        let (dumped, pre_dumped) = (page_bytes(img), page_bytes(&parent));
        assert!(dumped < pre_dumped, "{name}: the dump on a parent wrote {dumped} bytes of pages, the pre-dump {pre_dumped}");
        restore_and_count_on(rt, name, checkpointed);
    });
}

/// A pre-dump leaves the container running, and so does a second one on the first (criu's
/// chain of pre-dumps, `--pre-dump --parent-path ../pre1`); the container is then killed and
/// deleted as any.
#[test]
fn pre_dumps_leave_the_container_running() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        let counter = Counter::start(rt);
        pre_dump(rt, name, &counter, "pre1", &[]);
        pre_dump(rt, name, &counter, "pre2", &["--parent-path", "../pre1"]);
        let link = counter.images.join("pre2").join("parent");
        assert_eq!(std::fs::read_link(&link).ok().as_deref(), Some(Path::new("../pre1")), "{name}: {}", link.display());
        kill_and_delete(rt, &counter.id, &counter.bundle);
    });
}

/// A `--parent-path` that is absolute, missing or not a directory is refused in one line
/// naming the flag, as runc refuses it, before criu runs: the container runs on with the same
/// init. Ours also leaves no image directory behind (runc has made it by then).
#[test]
fn a_bad_parent_path_is_refused_and_the_container_runs_on() {
    skip_if!(round_trip_blocker());
    each_runtime(|rt, name| {
        let (bundle, images, id) = sleeping(rt);
        std::fs::write(images.join("a-file"), "").expect("write a file");
        let image_path = images.join_str("img");
        let absolute = images.join_str("a-dir");
        for (parent, words) in [
            (absolute.as_str(), &["--parent-path must be relative"][..]),
            ("../no-such-parent", &["invalid --parent-path", "no such file or directory"]),
            ("../a-file", &["invalid --parent-path", "not a directory"]),
        ] {
            assert_checkpoint_refused(rt, name, &id, &image_path, &["--parent-path", parent], words);
        }
        kill_and_delete(rt, &id, &bundle);
    });
}

/// A running `sleep 1000`: its bundle, a scratch directory for images, its id.
fn sleeping(rt: &Runtime) -> (Bundle, ScratchDir, String) {
    let bundle = Bundle::new(&["sleep", "1000"]);
    let id = rt.new_id("cr");
    rt.start_container(&id, &bundle);
    (bundle, ScratchDir::new("cr-images"), id)
}

/// `checkpoint ARGS --image-path IMAGE_PATH ID` is refused in one line saying each of `words`
/// (in any case), the container running on with the same init; ours leaves no image directory.
fn assert_checkpoint_refused(rt: &Runtime, name: &str, id: &str, image_path: &str, args: &[&str], words: &[&str]) {
    let pid = rt.pid(id);
    let out = rt.cmd(&[&["checkpoint"][..], args, &["--image-path", image_path, id]].concat()).failed();
    let what = format!("{name}: {args:?}: {}", out.describe());
    assert_eq!(out.stderr_lines().len(), 1, "{what}: one line");
    for word in words {
        assert!(out.stderr.to_lowercase().contains(&word.to_lowercase()), "{what}: says {word:?}");
    }
    assert_eq!(rt.status(id), "running", "{what}: the container runs on");
    assert_eq!(rt.pid(id), pid, "{what}: the same init");
    if !env::is_runc(rt.bin()) {
        assert!(!Path::new(image_path).exists(), "{what}: no image directory left");
    }
}

/// `restore` in the foreground waits for the restored container: SIGKILL of its init ends the
/// restore with 137, and the container is gone after, as `run` in the foreground.
#[test]
fn foreground_restore_waits_and_deletes() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        // `images` bound: a field `..` left unbound would be dropped here, and its dir with it.
        let Checkpointed { data, images: _images, bundle, id, image_path, at_checkpoint } = Counter::start(rt).checkpoint_away(rt, name);
        let restore = rt.spawn_stdin(&["restore", "--image-path", &image_path, "--bundle", bundle.path(), &id], b"");
        let restore =
            restore.running_until(&format!("{name}: the restored container to run"), || rt.try_status(&id).as_deref() == Some("running"));
        wait::wait_for(&format!("{name}: the restored counter to go on"), || read_count(&data).filter(|c| *c > at_checkpoint));
        rt.kill(&id, "KILL");
        let out = restore.wait();
        assert_eq!(out.code(), 137, "{name}: the foreground restore ends with its container: {}", out.describe());
        assert!(rt.try_status(&id).is_none(), "{name}: the container is deleted after a foreground restore");
        rt.assert_nothing_left(&id, bundle.path());
    });
}

/// A free TCP port on the loopback (the container shares the host's network namespace).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("local address").port()
}

/// `GET /count` from the container's httpd: the body, or None while nothing answers.
fn http_count(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
    stream.write_all(b"GET /count HTTP/1.0\r\n\r\n").ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    reply.starts_with("HTTP/1.").then(|| reply.rsplit("\r\n\r\n").next().unwrap_or("").trim().to_string())
}

/// A TCP listener (busybox httpd serving the bind-mounted /data) checkpointed with the
/// counter: after restore the same listening socket answers on its port.
#[test]
fn tcp_listener_answers_after_restore() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        let port = free_port();
        let data = ScratchDir::new("cr-data");
        let mut bundle = counter_bundle(&data);
        let script = format!("httpd -p 127.0.0.1:{port} -h /data; {}", COUNTER[2]);
        bundle.set_args(&["sh", "-c", &script]);
        let id = rt.new_id("cr");
        bundle.prepare(&id);
        let (ok, what) = detached(rt, &["create", "--bundle", bundle.path(), &id]);
        assert!(ok, "{name}: {what}");
        rt.start(&id);
        wait::wait_for(&format!("{name}: httpd to answer on {port}"), || http_count(port));
        let images = ScratchDir::new("cr-images");
        let image_path = images.join_str("img");
        checkpoint(rt, &["--image-path", &image_path], &image_path, &id);
        assert!(http_count(port).is_none(), "{name}: nothing may answer on {port} once checkpointed");
        let (ok, what) = detached(rt, &["restore", "--detach", "--image-path", &image_path, "--bundle", bundle.path(), &id]);
        assert!(ok, "{name}: {what}");
        // The body is the counter's file: served once it holds a value.
        let counted = |body: &String| body.lines().any(|line| line.trim().parse::<u64>().is_ok());
        wait::wait_for(&format!("{name}: the restored httpd to serve /count"), || http_count(port).filter(counted));
        kill_and_delete(rt, &id, &bundle);
    });
}

#[test]
fn leave_running_keeps_the_same_init_counting() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        let Counter { data, images, bundle, id } = Counter::start(rt);
        let pid = rt.pid(&id);
        let image_path = images.join_str("img");
        let work_path = images.join_str("work");
        checkpoint(rt, &["--leave-running", "--image-path", &image_path, "--work-path", &work_path], &work_path, &id);
        assert_eq!(rt.status(&id), "running", "{name}: --leave-running keeps it running");
        assert_eq!(rt.pid(&id), pid, "{name}: --leave-running keeps the same init");
        assert!(Path::new(&work_path).join("dump.log").exists(), "{name}: criu's log goes to --work-path");
        let now = read_count(&data).unwrap_or(0);
        wait_count_at_least(&data, now + 2);
        kill_and_delete(rt, &id, &bundle);
    });
}

#[test]
fn checkpoint_of_a_container_that_is_not_running_is_refused() {
    skip_if!(rustpod_tests::needs::containers());
    each_runtime(|rt, name| {
        let bundle = Bundle::new(&["sleep", "1000"]);
        let images = ScratchDir::new("cr-images");
        let id = rt.new_id("cr");
        rt.create(&id, &bundle);
        let image_path = images.join_str("img");
        let out = rt.cmd(&["checkpoint", "--image-path", &image_path, &id]).failed();
        assert_eq!(out.stderr_lines().len(), 1, "{name}: one line: {}", out.describe());
        assert!(out.stderr.contains("created"), "{name}: the error names the status: {}", out.describe());
        assert_eq!(rt.status(&id), "created", "{name}: the container stays as it was");
        assert!(!Path::new(&image_path).exists(), "{name}: no image directory made for a refused checkpoint");
        let missing = rt.cmd(&["checkpoint", "--image-path", &image_path, "no-such-container"]).failed();
        assert!(missing.stderr.contains("does not exist"), "{name}: {}", missing.describe());
        rt.delete(&id);
        rt.assert_nothing_left(&id, bundle.path());
    });
}

#[test]
fn restore_from_a_missing_image_path_leaves_nothing() {
    skip_if!(rustpod_tests::needs::containers());
    each_runtime(|rt, name| {
        let bundle = Bundle::new(&["sleep", "1000"]);
        let images = ScratchDir::new("cr-images");
        let id = rt.new_id("cr");
        bundle.prepare(&id);
        let image_path = images.join_str("never-written");
        let out = rt.cmd(&["restore", "--detach", "--image-path", &image_path, "--bundle", bundle.path(), &id]).failed();
        assert_eq!(out.stderr_lines().len(), 1, "{name}: one line: {}", out.describe());
        assert!(rt.try_status(&id).is_none(), "{name}: no container after a failed restore");
        rt.assert_nothing_left(&id, bundle.path());
        if !env::is_runc(rt.bin()) {
            // Ours names the path and the errno (runc's words depend on whether criu runs).
            assert!(
                out.stderr.contains(&image_path) || out.stderr.contains("criu"),
                "{name}: the error names the image path or criu: {}",
                out.describe()
            );
        }
    });
}

/// criu missing (a path with nothing there) for ours; on a host where criu itself fails its
/// check (or is missing), both runtimes: the checkpoint fails, the container runs on.
#[test]
fn checkpoint_and_restore_without_a_working_criu_fail_and_leave_the_container() {
    skip_if!(rustpod_tests::needs::containers());
    let mut cases: Vec<(Runtime, &str)> = vec![(Runtime::under_test().with_globals(&["--criu", "/nonexistent/criu"]), "/nonexistent/criu")];
    if rustpod_tests::needs::criu().is_some() {
        for rt in Runtime::runc_and_under_test() {
            cases.push((rt, "criu"));
        }
    }
    for (rt, criu) in cases {
        let name = format!("{} (criu {criu})", rt.bin().display());
        let bundle = Bundle::new(&["sleep", "1000"]);
        let images = ScratchDir::new("cr-images");
        let id = rt.new_id("cr");
        rt.start_container(&id, &bundle);
        let pid = rt.pid(&id);
        let image_path = images.join_str("img");
        let out = rt.cmd(&["checkpoint", "--image-path", &image_path, &id]).failed();
        assert!(out.stderr.to_lowercase().contains("criu"), "{name}: the error names criu: {}", out.describe());
        assert_eq!(rt.status(&id), "running", "{name}: a failed checkpoint leaves it running");
        assert_eq!(rt.pid(&id), pid, "{name}: the same init runs on");
        let restored_id = rt.new_id("cr");
        bundle.prepare(&restored_id);
        let out = rt.cmd(&["restore", "--detach", "--image-path", &image_path, "--bundle", bundle.path(), &restored_id]).failed();
        assert!(rt.try_status(&restored_id).is_none(), "{name}: no container after a failed restore: {}", out.describe());
        kill_and_delete(&rt, &id, &bundle);
        rt.assert_nothing_left(&restored_id, bundle.path());
        if !env::is_runc(rt.bin()) {
            assert_eq!(out.stderr_lines().len(), 1, "{name}: one line: {}", out.describe());
            assert!(out.stderr.contains(criu), "{name}: names the criu it ran: {}", out.describe());
            assert!(!Path::new(&image_path).exists(), "{name}: nothing made before criu was found unusable");
        }
    }
}

/// Flags we do not carry to criu (and `--status-fd` without the `--lazy-pages` it reports on)
/// are refused naming the flag, never ignored; the container runs on.
#[test]
fn unsupported_checkpoint_flags_are_refused() {
    skip_if!(rustpod_tests::needs::containers());
    let rt = Runtime::under_test();
    if env::testing_runc_itself() {
        skip!("runc supports these flags: the refusal is ours");
    }
    let bundle = Bundle::new(&["sleep", "1000"]);
    let images = ScratchDir::new("cr-images");
    let id = rt.new_id("cr");
    rt.start_container(&id, &bundle);
    let image_path = images.join_str("img");
    for flags in [&["--manage-cgroups-mode", "bogus"][..], &["--status-fd", "1"], &["--auto-dedup"], &["--empty-ns", "network"]] {
        let args = [&["checkpoint"][..], flags, &["--image-path", &image_path, &id]].concat();
        let out = rt.cmd(&args).failed();
        assert_eq!(out.stderr_lines().len(), 1, "{flags:?}: one line: {}", out.describe());
        assert!(out.stderr.contains(flags[0]), "{flags:?}: the error names the flag: {}", out.describe());
        assert_eq!(rt.status(&id), "running", "{flags:?}: the container runs on");
        assert!(!Path::new(&image_path).exists(), "{flags:?}: nothing made");
    }
    kill_and_delete(&rt, &id, &bundle);
}

/// A `criu page-server` on the loopback writing into a directory: started as a daemon (it
/// listens before `-d` returns), it serves one dump and leaves; killed by its pid if still there.
struct CriuPageServer {
    pid: i32,
}

impl CriuPageServer {
    fn start(dir: &Path, port: u16) -> Self {
        let pid_file = dir.join("page-server.pid");
        let status = Command::new("criu")
            .args(["page-server", "--address", "127.0.0.1", "--port", &port.to_string(), "-d", "-v4", "-o", "page-server.log"])
            .arg("--images-dir")
            .arg(dir)
            .arg("--pidfile")
            .arg(&pid_file)
            .status()
            .expect("run criu page-server");
        assert!(status.success(), "criu page-server -d exited {status}");
        let pid = std::fs::read_to_string(&pid_file).ok().and_then(|p| p.trim().parse().ok());
        CriuPageServer { pid: pid.unwrap_or_else(|| panic!("criu page-server wrote no pid in {}", pid_file.display())) }
    }

    fn gone(&self) -> bool {
        !Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

impl Drop for CriuPageServer {
    fn drop(&mut self) {
        if !self.gone() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// `checkpoint --page-server 127.0.0.1:PORT` with a `criu page-server` listening there: the
/// memory pages go to the page server's directory and none to the image directory; with the
/// server's images put beside the dump's, `restore` brings the counter back counting on.
#[test]
fn page_server_takes_the_pages_and_restore_uses_them() {
    skip_if!(round_trip_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        let counter = Counter::start(rt);
        let served = counter.images.join("served");
        std::fs::create_dir(&served).expect("make the page server's directory");
        let port = free_port();
        let server = CriuPageServer::start(&served, port);
        let checkpointed = counter.checkpoint_away_with(rt, name, &["--page-server", &format!("127.0.0.1:{port}")]);
        assert!(wait::eventually(|| server.gone()), "{name}: the page server {} did not leave after the dump", server.pid);
        let img = Path::new(&checkpointed.image_path);
        assert_eq!(page_bytes(img), 0, "{name}: pages written to the image directory despite --page-server");
        assert!(page_bytes(&served) > 0, "{name}: the page server got no pages");
        for entry in std::fs::read_dir(&served).expect("read the page server's directory").flatten() {
            if entry.file_name().to_string_lossy().ends_with(".img") {
                std::fs::copy(entry.path(), img.join(entry.file_name())).expect("copy a served image");
            }
        }
        restore_and_count_on(rt, name, checkpointed);
    });
}

/// A child process killed (by its pid) and reaped when dropped, if it has not ended.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl Reaped {
    /// Its exit, waited for (bounded).
    fn exit(&mut self, what: &str) -> std::process::ExitStatus {
        wait::wait_for(what, || self.0.try_wait().ok().flatten())
    }
}

/// Why criu cannot migrate lazily here: runc's test asks `criu check --feature uffd-noncoop`.
fn lazy_pages_blocker() -> Option<String> {
    let out = Command::new("criu").args(["check", "--feature", "uffd-noncoop"]).output().ok()?;
    (!out.status.success()).then(|| format!("criu check --feature uffd-noncoop: {}", String::from_utf8_lossy(&out.stdout).trim()))
}

/// A lazy checkpoint that wrote its ready byte: `checkpoint --lazy-pages --page-server
/// 127.0.0.1:PORT --status-fd 1`, spawned and read until byte 0 or EOF. A dump that ended on
/// criu's freeze timeout (see `dump_retrying_criu_freeze_timeouts`) is started again on a new
/// port, at most three times in all; any other early end panics with the checkpoint's stderr
/// and criu's errors from its log.
fn lazy_checkpoint_ready(
    rt: &Runtime,
    name: &str,
    id: &str,
    images: &ScratchDir,
    image_path: &str,
    work_path: &str,
) -> (Reaped, String, std::path::PathBuf) {
    let errors = images.join("checkpoint.stderr");
    for attempt in 1..=3 {
        let port = free_port().to_string();
        let server = format!("127.0.0.1:{port}");
        let cpt = ["--root", rt.root(), "checkpoint", "--lazy-pages", "--page-server", &server, "--status-fd", "1"];
        let rest = ["--manage-cgroups-mode", "ignore", "--image-path", image_path, "--work-path", work_path, id];
        let errors_file = std::fs::File::create(&errors).expect("create the checkpoint's stderr file");
        let mut command = Command::new(rt.bin());
        command.args(cpt).args(rest).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(errors_file);
        let mut checkpoint = Reaped(command.spawn().expect("spawn the checkpoint"));
        let mut status = checkpoint.0.stdout.take().expect("the checkpoint's stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut byte = [1u8];
            let _ = tx.send(std::io::Read::read(&mut status, &mut byte).map(|n| (n, byte[0])).ok());
        });
        let ready = wait::wait_for(&format!("{name}: the status fd"), || rx.try_recv().ok());
        if ready == Some((1, 0)) {
            return (checkpoint, port, errors);
        }
        let ended = checkpoint.exit(&format!("{name}: the failed lazy checkpoint to end"));
        let said = std::fs::read_to_string(&errors).unwrap_or_default();
        if attempt < 3 && criu_froze_too_long(&said, [format!("{work_path}/dump.log")]) {
            eprintln!("{name}: criu's freeze timed out in a lazy dump ({ended}); dumping again");
            let _ = std::fs::remove_file(Path::new(work_path).join("dump.log"));
            continue;
        }
        panic!(
            "{name}: --status-fd gets byte 0 when the pages are ready, got {ready:?}; the checkpoint {ended}: {}\ncriu's log in {work_path}:\n{}",
            said.trim(),
            criu_errors(work_path)
        );
    }
    unreachable!("the third attempt returns or panics")
}

/// runc's lazy migration: `checkpoint --lazy-pages --page-server 127.0.0.1:PORT --status-fd 1`
/// writes byte 0 to its stdout once the images are there and then serves the pages; `criu
/// lazy-pages` fetches them for a `restore --lazy-pages` under a new id (the old tree is only
/// gone once the last page went); the checkpoint then ends, the old init gone (ours destroys
/// the container too), and the restored counter goes on from where it was.
#[test]
fn lazy_pages_migrate_the_counter() {
    skip_if!(round_trip_blocker());
    skip_if!(lazy_pages_blocker());
    let _turn = criu_turn();
    each_runtime(|rt, name| {
        let Counter { data, images, bundle, id } = Counter::start(rt);
        let (image_path, work_path) = (images.join_str("img"), images.join_str("work"));
        let old_pid = rt.pid(&id);
        let (mut checkpoint, port, errors) = lazy_checkpoint_ready(rt, name, &id, &images, &image_path, &work_path);
        assert!(Path::new(&image_path).join("inventory.img").exists(), "{name}: the images are written by then");
        let at_checkpoint = read_count(&data).expect("the counter wrote /data/count");

        let mut lazy = Command::new("criu");
        lazy.args([
            "lazy-pages",
            "--page-server",
            "--address",
            "127.0.0.1",
            "--port",
            &port,
            "-v4",
            "-o",
            "lazy-pages.log",
            "-D",
            &image_path,
        ]);
        let mut lazy = Reaped(lazy.stdin(Stdio::null()).spawn().expect("spawn criu lazy-pages"));
        let socket = Path::new(&image_path).join("lazy-pages.socket");
        wait::wait_for(&format!("{name}: criu lazy-pages to listen"), || socket.exists().then_some(()));
        let restored = rt.new_id("cr");
        bundle.prepare(&restored);
        // criu leaves cgroups alone at restore too: the old container's cgroup (still there
        // until the last page went) must not get the restored tree.
        let restore = ["restore", "--detach", "--lazy-pages", "--manage-cgroups-mode", "ignore", "--image-path", &image_path];
        let (ok, what) = detached(rt, &[&restore[..], &["--bundle", bundle.path(), &restored]].concat());
        assert!(ok, "{name}: {what}");
        let ended = checkpoint.exit(&format!("{name}: the lazy checkpoint to end"));
        let said = std::fs::read_to_string(&errors).unwrap_or_default();
        assert!(ended.success(), "{name}: the lazy checkpoint failed: {said}");
        assert!(lazy.exit(&format!("{name}: criu lazy-pages to end")).success(), "{name}: criu lazy-pages failed");
        let old_init = format!("/proc/{old_pid}");
        assert!(wait::eventually(|| !Path::new(&old_init).exists()), "{name}: the migrated init {old_pid} must be gone");
        if !env::is_runc(rt.bin()) {
            assert!(rt.try_status(&id).is_none(), "{name}: the checkpoint destroys the migrated container: {said}");
        }
        // runc 1.3.6 may still list it (its destroy can find the tree not yet gone): remove it.
        // (Its bundle is the restored one's now: only its state and cgroup can be looked for.)
        let _ = rt.cmd(&["delete", "--force", &id]);
        let gone = || rt.try_status(&id).is_none() && rustpod_tests::cgroup::dirs(&id).is_empty();
        assert!(wait::eventually(gone), "{name}: the migrated container's state or cgroup is left: {:?}", rustpod_tests::cgroup::dirs(&id));
        let first = wait::wait_for(&format!("{name}: the restored counter to write"), || read_count(&data).filter(|c| *c != at_checkpoint));
        assert!(first > at_checkpoint, "{name}: the counter restarted: {first} after {at_checkpoint}");
        wait_count_at_least(&data, first + 3);
        kill_and_delete(rt, &restored, &bundle);
    });
}

/// A malformed `--page-server` is refused in runc's words before anything else, the container
/// running on; ours makes no image directory.
#[test]
fn a_malformed_page_server_is_refused_in_runcs_words() {
    skip_if!(rustpod_tests::needs::containers());
    each_runtime(|rt, name| {
        let (bundle, images, id) = sleeping(rt);
        let image_path = images.join_str("img");
        for (value, words) in [
            ("no-port", "Use --page-server ADDRESS:PORT to specify page server"),
            (":27", "Use --page-server ADDRESS:PORT to specify page server"),
            ("127.0.0.1:port", "Invalid port number"),
        ] {
            assert_checkpoint_refused(rt, name, &id, &image_path, &["--page-server", value], &[words]);
        }
        kill_and_delete(rt, &id, &bundle);
    });
}

/// The counter in the container's own /tmp (containerd's snapshot), read through the init's root.
fn count_in(pid: i32) -> Option<u64> {
    last_count(&std::fs::read_to_string(format!("/proc/{pid}/root/tmp/count")).ok()?)
}

/// One way containerd reaches a runtime: a name, the `ctr run` flags, and the runtime binary
/// containerd's runc shim runs (None: our shim, which runs none).
struct ContainerdPath {
    name: String,
    flags: Vec<String>,
    runc_binary: Option<String>,
}

/// containerd 2.x's runc shim running runc, then the runtime under test; then our shim.
fn containerd_paths() -> Vec<ContainerdPath> {
    let mut paths: Vec<ContainerdPath> = Runtime::runc_and_under_test()
        .iter()
        .map(|rt| {
            let bin = rt.bin().display().to_string();
            ContainerdPath {
                name: format!("containerd's runc shim running {bin}"),
                flags: vec!["--runc-binary".into(), bin.clone()],
                runc_binary: Some(bin),
            }
        })
        .collect();
    paths.push(ContainerdPath {
        name: "containerd-shim-rustpod-v1".into(),
        flags: vec!["--runtime".into(), rustpod_tests::shim::RUNTIME.into()],
        runc_binary: None,
    });
    paths
}

/// The command lines of the processes other than `pid` holding the pipe `pid`'s fd `fd` is
/// (empty if it is not a pipe).
fn other_ends(pid: i32, fd: u32) -> Vec<String> {
    let Ok(target) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) else { return Vec::new() };
    let target = target.display().to_string();
    if !target.starts_with("pipe:") {
        return Vec::new();
    }
    let holds = |p: &str| {
        std::fs::read_dir(format!("/proc/{p}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.display().to_string() == target))
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|p| p.parse::<i32>().is_ok_and(|n| n != pid) && holds(p))
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default().replace('\0', " "))
        .collect()
}

/// The init's stdout is a pipe its shim holds (and copies to containerd's FIFO).
fn assert_stdout_is_the_shims_pipe(name: &str, pid: i32) {
    let holders = other_ends(pid, 1);
    assert!(
        holders.iter().any(|cmd| cmd.contains("containerd-shim")),
        "{name}: init {pid}'s stdout ({:?}) is no pipe of its shim; held by {holders:?}",
        std::fs::read_link(format!("/proc/{pid}/fd/1"))
    );
}

/// Through containerd 2.x on each path: `ctr task checkpoint --image-path` (leaving it running;
/// the runc shim's `checkpoint --image-path --work-path --leave-running`, our shim's
/// Checkpoint), `ctr containers checkpoint --rw --task` into the content store, `ctr task
/// checkpoint --exit` (the task stops and is deleted), then `ctr containers restore --rw --live`:
/// its task Create names the unpacked checkpoint and records it, its Start restores (the runc
/// shim's `restore --detach --pid-file -no-subreaper`, our shim's restore helper) with the
/// shim's pipes as the init's stdio: the restored counter goes on, its stdout a pipe of its
/// shim, and it is killed, reaped and deleted as any task.
#[test]
fn containerd_checkpoints_and_restores() {
    skip_if!(rustpod_tests::containerd2::blocker());
    skip_if!(rustpod_tests::needs::criu());
    let _turn = criu_turn();
    let ctd = rustpod_tests::containerd2::Containerd2::start();
    for path in containerd_paths() {
        let name = &path.name;
        let id = rustpod_tests::scratch::unique_name("crd");
        let counter = COUNTER[2].replace("/data/count", "/tmp/count");
        let flags: Vec<&str> = path.flags.iter().map(String::as_str).collect();
        let run = [&["run", "-d", "--net-host"][..], &flags, &[rustpod_tests::shim::IMAGE, &id, "sh", "-c", &counter]].concat();
        ctd.ctr(&run).ok();
        ctd.wait_task(&id, "RUNNING");
        let pid = ctd.task_pid(&id);
        wait::wait_for(&format!("{name}: the counter to reach 20"), || count_in(pid).filter(|c| *c >= 20));
        assert_stdout_is_the_shims_pipe(name, pid);

        let images = ScratchDir::new("cr-images");
        let image_path = images.join_str("img");
        dump_retrying_criu_freeze_timeouts(&image_path, || ctd.ctr(&["task", "checkpoint", "--image-path", &image_path, &id])).ok();
        assert_eq!(ctd.task_status(&id).as_deref(), Some("RUNNING"), "{name}: a checkpoint without --exit leaves it running");
        // CI run 77: containerd 2.1 listed runc's task RUNNING with pid 0 right after this
        // checkpoint (one vCPU, TCG); a zero names no other init, so it is waited out.
        let mut after = 0;
        wait::eventually(|| {
            after = ctd.task_pid(&id);
            after != 0
        });
        assert_eq!(after, pid, "{name}: the same init runs on; ctr task ls:\n{}", ctd.ctr(&["task", "ls"]).stdout);
        assert!(Path::new(&image_path).join("descriptors.json").exists(), "{name}: no images in {image_path}");

        let reference = format!("localhost/checkpoint-{id}:1");
        // Its dump too can overrun criu's freeze timeout (CI run 51, one vCPU beside the host's tests).
        let store_dump = images.join_str("store");
        // --rw takes the snapshot's changes too: a dump that catches the shell inside `>>`
        // records an open /tmp/count, which a fresh snapshot lacks (CI run 84, one vCPU).
        dump_retrying_criu_freeze_timeouts(&store_dump, || ctd.ctr(&["containers", "checkpoint", "--rw", "--task", &id, &reference])).ok();
        // --exit: criu ends the tree, the task stops, containerd's delete works.
        let exit_path = images.join_str("exit");
        dump_retrying_criu_freeze_timeouts(&exit_path, || ctd.ctr(&["task", "checkpoint", "--exit", "--image-path", &exit_path, &id])).ok();
        ctd.wait_task(&id, "STOPPED");
        assert!(Path::new(&exit_path).join("descriptors.json").exists(), "{name}: no images in {exit_path}");
        ctd.ctr(&["task", "rm", &id]).ok();
        ctd.ctr(&["containers", "rm", &id]).ok();
        // Named by path: in run 74 one restore failed with runc's bare words, on a path unknown.
        let restore = ctd.ctr(&["containers", "restore", "--rw", "--live", &id, &reference]);
        assert!(restore.success(), "{name}: ctr containers restore --rw --live failed: {}", restore.describe());
        ctd.wait_task(&id, "RUNNING");
        let restored = ctd.task_pid(&id);
        // The restored snapshot holds /tmp/count as it was at the dump (or a little later:
        // containerd takes the changes after the task's dump); the restored shell counts on.
        let first = wait::wait_for(&format!("{name}: the restored counter to write"), || count_in(restored));
        assert!(first > 20, "{name}: the restored counter restarted: {first}");
        wait::wait_for(&format!("{name}: the restored counter to go on"), || count_in(restored).filter(|c| *c > first));
        assert_stdout_is_the_shims_pipe(name, restored);
        ctd.ctr(&["task", "kill", "-s", "SIGKILL", &id]).ok();
        ctd.wait_task(&id, "STOPPED");
        ctd.ctr(&["task", "rm", &id]).ok();
        ctd.ctr(&["containers", "rm", &id]).ok();
    }
}

/// runc's options naming the runtime binary containerd's runc shim runs, as `ctr
/// --runc-binary` sends them.
fn runc_options(
    binary: &str,
) -> containerd_shim_protos::protobuf::MessageField<containerd_shim_protos::protobuf::well_known_types::any::Any> {
    use containerd_shim_protos::protobuf::Message;
    let options = containerd_shim_protos::shim::oci::Options { binary_name: binary.into(), ..Default::default() };
    containerd_shim_protos::protobuf::MessageField::some(containerd_shim_protos::protobuf::well_known_types::any::Any {
        type_url: "containerd.runc.v1.Options".into(),
        value: options.write_to_bytes().expect("encode runc options"),
        ..Default::default()
    })
}

/// A Create naming a checkpoint directory that is not there, sent to each path's shim as
/// containerd sends one (ctr always unpacks a real one): the Create is taken (the runc shim
/// restores only at Start), the Start fails with the runc shim's code (Unknown, its "OCI runtime
/// restore failed"), the task stays created, its Delete works, and nothing is left: no state
/// dir, cgroup, mount or process (and, where rustpod restores, no image directory made).
#[test]
fn containerd_restore_from_a_missing_checkpoint_fails_as_the_runc_shims_and_leaves_nothing() {
    use containerd_shim_protos::shim::shim::{CreateTaskRequest, StateRequest};
    use ttrpc::proto::Code;
    skip_if!(rustpod_tests::containerd2::blocker());
    let ctd = rustpod_tests::containerd2::Containerd2::start();
    let mut starts = Vec::new();
    for path in containerd_paths() {
        let name = &path.name;
        // A running task gives us its shim to send the Create to.
        let host = rustpod_tests::scratch::unique_name("crh");
        let flags: Vec<&str> = path.flags.iter().map(String::as_str).collect();
        ctd.run_sleeping_with(&host, &flags);
        let shim = rustpod_tests::shim_task::Task::connect(&ctd.shim_address(&host), &host);

        let id = rustpod_tests::scratch::unique_name("crb");
        let task = shim.about(&id);
        let bundle = Bundle::new(&["sleep", "1000"]);
        bundle.prepare(&id);
        let images = ScratchDir::new("cr-images");
        let missing = images.join_str("never-written");
        let create = CreateTaskRequest {
            id: id.clone(),
            bundle: bundle.path().into(),
            checkpoint: missing.clone(),
            options: path.runc_binary.as_deref().map(runc_options).unwrap_or_default(),
            ..Default::default()
        };
        assert_eq!(task.call("Create", &create), Code::OK, "{name}: a Create with a checkpoint is taken (the restore is Start's)");
        let started = task.start("");
        assert_ne!(started, Code::OK, "{name}: Start restored from {missing}, which does not exist");
        starts.push((name.clone(), started));
        assert_eq!(
            task.call("State", &StateRequest { id: id.clone(), ..Default::default() }),
            Code::OK,
            "{name}: State after the failed Start"
        );
        assert_eq!(task.delete(""), Code::OK, "{name}: Delete after the failed Start");
        assert_eq!(
            task.call("State", &StateRequest { id: id.clone(), ..Default::default() }),
            Code::NOT_FOUND,
            "{name}: State after Delete"
        );
        let root = match path.runc_binary {
            Some(_) => ctd.runc_shim_root(),
            None => ctd.state_root(),
        };
        rustpod_tests::leftovers::assert_nothing_left(&root.display().to_string(), &id, bundle.path());
        // runc makes the image directory before it finds it empty; ours makes nothing.
        if !path.runc_binary.as_deref().is_some_and(|bin| env::is_runc(Path::new(bin))) {
            assert!(!Path::new(&missing).exists(), "{name}: the failed restore made {missing}");
        }
    }
    eprintln!("Start codes: {starts:?}");
    let (reference, code) = &starts[0];
    assert_eq!(*code, Code::UNKNOWN, "{reference}: the runc shim's code for a failed restore");
    for (name, got) in &starts {
        assert_eq!(got, code, "{name}: Start's code for a missing checkpoint (left), {reference}'s (right)");
    }
}

/// `features` claims checkpointing exactly where `criu check` passes (issue 24: disabled on a
/// host whose criu fails), asked on each call; runc says "true" whatever criu says. A decoy
/// `criu` first on PATH that fails `check` turns the claim off.
#[test]
fn features_claims_checkpoint_only_where_criu_check_passes() {
    use std::os::unix::fs::PermissionsExt;
    let rt = Runtime::under_test();
    if env::testing_runc_itself() {
        skip!("runc claims checkpoint.enabled whatever criu says: the rule is ours");
    }
    let claim = |path: Option<&str>| {
        let mut cmd = Command::new(rt.bin());
        cmd.arg("features").stdin(Stdio::null());
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        let out = cmd.output().unwrap_or_else(|e| panic!("run {} features: {e}", rt.bin().display()));
        assert!(out.status.success(), "features: {out:?}");
        let features: serde_json::Value = serde_json::from_slice(&out.stdout).expect("features prints JSON");
        features["annotations"]["org.opencontainers.runc.checkpoint.enabled"].clone()
    };
    let usable = rustpod_tests::needs::criu().is_none();
    assert_eq!(claim(None), json!(usable.to_string()), "checkpoint.enabled vs `criu check` ({:?})", rustpod_tests::needs::criu());

    let decoy = ScratchDir::new("cr-decoy");
    let mark = decoy.join_str("ran");
    let script = decoy.join("criu");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {mark}\nexit 1\n")).expect("write the decoy criu");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod the decoy criu");
    let path = format!("{}:{}", decoy.str(), std::env::var("PATH").unwrap_or_default());
    assert_eq!(claim(Some(&path)), json!("false"), "checkpoint.enabled with a criu whose check fails");
    assert!(Path::new(&mark).exists(), "features did not ask the criu on PATH");
}

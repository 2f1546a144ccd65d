// Symlink races on mount targets (issue 7): while containers are created, a thread keeps
// swapping a mount target (CVE-2021-30465) or the rootfs's /proc (CVE-2023-27561) with a
// symlink to a host dir. Whatever wins the race, no mount may land outside the rootfs: a
// createContainer hook records the container's mount table before pivot_root, where a mount
// on a host path would show. Each race runs on runc first (`$RUNC_BIN`: runc 1.1.5 on the host,
// runc 1.3.6 and crun 1.28 in the sid guest), then on the runtime under test.

use rustpod_tests::scratch::ScratchDir;
use rustpod_tests::{env, json, leftovers, needs, skip_if, Bundle, Runtime};
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Containers created per race.
const ROUNDS: usize = 30;

/// Swaps per burst: even, so that the names are back in place for the quiet gap after it.
const BURST: u64 = 64;

/// The longest quiet gap. (A cap of 1024 bursts' time once seemed too short under TCG: the debug
/// rustpod lost all 30 creates after crun's turn. That was most likely the parity Swapper's Drop
/// now restores, seen again in CI run 33 with this cap.)
const MAX_GAP: std::time::Duration = std::time::Duration::from_secs(5);

/// Swaps two names in one directory with renameat2(RENAME_EXCHANGE) until dropped, in bursts
/// each followed by a quiet gap, at first as long as the burst took: with swaps alone, a slow
/// machine (the sid guest under TCG) saw every create of runc 1.3.6 and crun lose, and a race
/// nobody wins tests nothing. A runtime whose create is slower than the gaps (a debug build
/// under TCG) still loses every time, so each lost create doubles the gaps (`rest_longer`).
struct Swapper {
    a: CString,
    b: CString,
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    /// The gap as a multiple of the burst's time.
    gap: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Swapper {
    fn start(a: PathBuf, b: PathBuf) -> Swapper {
        let (stop, swaps, gap) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(1)));
        let (thread_stop, thread_swaps, thread_gap) = (Arc::clone(&stop), Arc::clone(&swaps), Arc::clone(&gap));
        let a = CString::new(a.as_os_str().as_bytes()).expect("path without NUL");
        let b = CString::new(b.as_os_str().as_bytes()).expect("path without NUL");
        let (thread_a, thread_b) = (a.clone(), b.clone());
        let thread = std::thread::spawn(move || {
            let (a, b) = (thread_a, thread_b);
            let mut burst = std::time::Instant::now();
            while !thread_stop.load(Ordering::Relaxed) {
                exchange(&a, &b);
                if (thread_swaps.fetch_add(1, Ordering::Relaxed) + 1) % BURST == 0 {
                    std::thread::sleep((burst.elapsed() * thread_gap.load(Ordering::Relaxed) as u32).min(MAX_GAP));
                    burst = std::time::Instant::now();
                }
            }
        });
        Swapper { a, b, stop, swaps, gap, thread: Some(thread) }
    }

    /// Doubles the quiet gaps, up to MAX_GAP.
    fn rest_longer(&self) {
        let gap = self.gap.load(Ordering::Relaxed);
        self.gap.store((gap * 2).min(1 << 20), Ordering::Relaxed);
    }

    fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Swapper {
    /// Stops swapping and puts the names back: stopped after an odd count, the next runtime's
    /// swapper would leave the symlink in place through every quiet gap, and each of its creates
    /// would lose (crun's turn ended after 7,713 swaps in CI run 33; rustpod then won 0 of 30).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if self.swaps() % 2 == 1 {
            exchange(&self.a, &self.b);
        }
    }
}

/// renameat2(RENAME_EXCHANGE) of two names.
fn exchange(a: &CString, b: &CString) {
    // SAFETY: two valid C strings; renameat2 only reads them.
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
}

/// A bundle whose createContainer hook appends the container's mount table to `report`.
fn recording_bundle(report: &Path) -> Bundle {
    let mut bundle = Bundle::new(&["true"]);
    let script = format!("cat /proc/self/mountinfo >> '{}'", report.display());
    bundle.set("/hooks", json!({"createContainer": [{"path": "/bin/sh", "args": ["sh", "-c", script]}]}));
    bundle
}

/// Mount points (as the recording process saw them) at or under `dir`.
fn mounts_at_or_under(report: &Path, dir: &Path) -> Vec<String> {
    let text = fs::read_to_string(report).unwrap_or_default();
    text.lines().filter_map(|line| line.split(' ').nth(4)).filter(|point| Path::new(point).starts_with(dir)).map(str::to_string).collect()
}

/// Creates and force-deletes `ROUNDS` containers from `bundle`; each create may win or lose
/// the race, but must fail cleanly and leave nothing. Returns how many were created.
fn race_creates(rt: &Runtime, bundle: &Bundle, swapper: &Swapper) -> usize {
    let mut created = 0;
    for _ in 0..ROUNDS {
        let id = rt.new_id("race");
        let out = rt.try_create(&id, bundle, &[]);
        if out.success() {
            created += 1;
        } else {
            eprintln!("{}: a create lost the race: {}", rt.bin().display(), out.stderr.trim());
            swapper.rest_longer();
            // The oracle's error lines are its own; ours are one line.
            if !env::is_runc(rt.bin()) {
                assert_eq!(out.stderr.trim().lines().count(), 1, "a create that lost the race must fail with one line: {}", out.describe());
                // Lost in the engine's rootfs step: the line says which mount, and which call
                // failed with which errno (or, for proc, the engine's own check that failed).
                let line = out.stderr.replace("\\\"", "\"");
                let names_errno = line
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|w| w.len() > 2 && w.starts_with('E') && w.chars().all(|c| c.is_ascii_uppercase()));
                assert!(
                    !line.contains("failed to prepare rootfs")
                        || (line.contains("to rootfs at \"") && (names_errno || line.contains("must be mounted on ordinary directory"))),
                    "a create that lost the race in the rootfs step must name the mount, the syscall and the errno: {}",
                    out.describe()
                );
            }
        }
        rt.cmd(&["delete", "--force", &id]);
        rt.assert_nothing_left(&id, bundle.path());
    }
    created
}

/// Creates containers from `bundle` while `a` and `b` are swapped, on runc and then on the
/// runtime under test, then checks that no mount ever landed on `<host>/victim` (the swapped
/// symlink's target) or anywhere under `host`.
fn race(host: &ScratchDir, bundle: &Bundle, a: PathBuf, b: PathBuf) {
    for rt in Runtime::runc_and_under_test() {
        race_on(&rt, host, bundle, a.clone(), b.clone());
    }
}

fn race_on(rt: &Runtime, host: &ScratchDir, bundle: &Bundle, a: PathBuf, b: PathBuf) {
    let who = rt.bin().display().to_string();
    let (victim, report) = (host.join("victim"), host.join("mountinfo"));
    // Each runtime's hooks record afresh.
    let _ = fs::remove_file(&report);
    let swapper = Swapper::start(a, b);
    let created = race_creates(rt, bundle, &swapper);
    let swaps = swapper.swaps();
    drop(swapper);
    eprintln!("{who}: {created} of {ROUNDS} creates won the race against {swaps} swaps");

    let escaped = mounts_at_or_under(&report, &victim);
    assert!(escaped.is_empty(), "{who}: mounts landed on the host path {}: {escaped:?}", victim.display());
    assert!(leftovers::mount_points_under(host.str()).is_empty(), "{who}: mounts are left on the host under {}", host.str());
    assert!(created > 0, "{who}: no create ever ran its mounts: the race tested nothing");
    assert!(fs::read_to_string(&report).is_ok_and(|r| !r.is_empty()), "{who}: the createContainer hook recorded no mount table");
}

#[test]
fn cve_2021_30465_racing_mount_target_symlink_never_mounts_outside_the_rootfs() {
    skip_if!(needs::containers());
    let host = ScratchDir::new("race-host");
    let victim = host.join("victim");
    fs::create_dir(&victim).expect("create the host victim dir");
    let report = host.join("mountinfo");
    let mut bundle = recording_bundle(&report);
    let race_dir = Path::new(&bundle.rootfs()).join("race");
    fs::create_dir(&race_dir).expect("create rootfs/race");
    fs::create_dir(race_dir.join("target")).expect("create rootfs/race/target");
    symlink(&victim, race_dir.join("swap")).expect("symlink rootfs/race/swap -> victim");
    bundle.add_mount(json!({"destination": "/race/target", "type": "tmpfs", "source": "tmpfs"}));

    race(&host, &bundle, race_dir.join("target"), race_dir.join("swap"));
}

#[test]
fn cve_2023_27561_racing_proc_symlink_never_mounts_outside_the_rootfs() {
    skip_if!(needs::containers());
    let host = ScratchDir::new("race-host");
    let victim = host.join("victim");
    fs::create_dir(&victim).expect("create the host victim dir");
    let report = host.join("mountinfo");
    let bundle = recording_bundle(&report);
    let rootfs = PathBuf::from(bundle.rootfs());
    // /proc (with maskedPaths and readonlyPaths under it) races with a symlink to the host.
    symlink(&victim, rootfs.join("proc-swap")).expect("symlink rootfs/proc-swap -> victim");

    race(&host, &bundle, rootfs.join("proc"), rootfs.join("proc-swap"));
}

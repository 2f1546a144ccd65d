// "Nothing left behind" checks for a container: its state dir under --root, its cgroups,
// mounts of its bundle, and processes living in its bundle; plus killing leftovers by pid.

use crate::cgroup;
use crate::wait;
use std::fs;
use std::path::Path;

/// Mount points in this mount namespace whose path contains `dir`.
pub fn mounts_under(dir: &str) -> Vec<String> {
    mount_points_under(dir).into_iter().map(|m| format!("mount {m}")).collect()
}

/// Whether `text` names path `dir` or something in it: `dir` followed by `/` or by anything
/// that cannot continue a file name. Test dirs are `<prefix>-<pid>-<n>`, so a plain substring
/// match would take `…-1` for `…-12` and reach into another test's processes and mounts.
pub fn mentions(text: &str, dir: &str) -> bool {
    let continues_name = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    text.match_indices(dir).any(|(at, _)| !text[at + dir.len()..].starts_with(continues_name))
}

/// Mount points (as in mountinfo, octal escapes kept) in or at `dir`, in mount order.
pub fn mount_points_under(dir: &str) -> Vec<String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|mount_point| mentions(mount_point, dir))
        .map(str::to_string)
        .collect()
}

/// Processes (other than this one) whose cmdline mentions `dir` or whose cwd or root is in it.
pub fn processes_under(dir: &str) -> Vec<String> {
    pids_under(dir).into_iter().map(|(_, what)| what).collect()
}

/// `processes_under`, with each process's pid.
pub fn pids_under(dir: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let Ok(procs) = fs::read_dir("/proc") else {
        return vec![];
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| process_in(pid, dir).map(|what| (pid, what)))
        .collect()
}

fn process_in(pid: i32, dir: &str) -> Option<String> {
    let proc_dir = Path::new("/proc").join(pid.to_string());
    let cmdline = fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    let link = |name: &str| fs::read_link(proc_dir.join(name)).ok().map(|p| p.to_string_lossy().into_owned());
    let inside = |p: &Option<String>| p.as_deref().is_some_and(|p| Path::new(p).starts_with(dir));
    let (cwd, root) = (link("cwd"), link("root"));
    (mentions(&cmdline, dir) || inside(&cwd) || inside(&root))
        .then(|| format!("process {pid} `{}` cwd={cwd:?} root={root:?}", cmdline.trim()))
}

/// SIGKILLs, by pid, every process `pids_under(dir)` finds, then removes the sockets the
/// shims among them served (named by their `-socket` argument) once nothing answers there:
/// a killed shim cannot remove its own.
pub fn kill_processes_under(dir: &str) {
    let found = pids_under(dir);
    let sockets: Vec<String> = found
        .iter()
        .filter_map(|(_, what)| {
            let mut words = what.split_whitespace();
            words.find(|w| *w == "-socket")?;
            Some(words.next()?.trim_start_matches("unix://").to_string())
        })
        .collect();
    kill_pids(found.iter().map(|(pid, _)| *pid));
    for socket in sockets {
        let dead = wait::eventually(|| std::os::unix::net::UnixStream::connect(&socket).is_err());
        if dead {
            let _ = fs::remove_file(&socket);
        }
    }
}

/// SIGKILLs, by pid, each of `pids`.
pub fn kill_pids(pids: impl IntoIterator<Item = i32>) {
    for pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Everything container `id` (of a runtime with state dir `root`, bundle `bundle`) left behind.
pub fn find(root: &str, id: &str, bundle: &str) -> Vec<String> {
    let state_dir = Path::new(root).join(id);
    let mut found: Vec<String> = state_dir.exists().then(|| format!("state dir {}", state_dir.display())).into_iter().collect();
    found.extend(cgroup::dirs(id).iter().map(|d| format!("cgroup {}", d.display())));
    found.extend(mounts_under(bundle));
    found.extend(processes_under(bundle));
    found
}

/// Waits (bounded) until container `id` left nothing behind; panics listing what remains.
#[track_caller]
pub fn assert_nothing_left(root: &str, id: &str, bundle: &str) {
    if wait::eventually(|| find(root, id, bundle).is_empty()) {
        return;
    }
    let left = find(root, id, bundle);
    panic!("container {id} left behind:\n  {}", left.join("\n  "));
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn a_dir_is_not_mentioned_by_a_longer_sibling() {
        let dir = "/var/tmp/rustpod-tests/sd-7-1";
        assert!(mentions("ctr --address /var/tmp/rustpod-tests/sd-7-1/containerd.sock", dir));
        assert!(mentions("/var/tmp/rustpod-tests/sd-7-1", dir));
        assert!(mentions("x /var/tmp/rustpod-tests/sd-7-1 y", dir));
        assert!(!mentions("ctr --address /var/tmp/rustpod-tests/sd-7-12/containerd.sock", dir));
        assert!(!mentions("/var/tmp/rustpod-tests/sd-7-1.tar", dir));
    }
}

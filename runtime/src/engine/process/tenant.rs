//! Starts an exec'd process confined exactly like the container's init.
//! libcontainer 0.7's tenant builder rebuilds `linux` without `seccomp` (and
//! never joins a user namespace), so we build the tenant spec ourselves and
//! drive the engine's public process pieces, as its builder would.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use libcontainer::container::Container;
use libcontainer::notify_socket::NotifyListener;
use libcontainer::process::args::{ContainerArgs, ContainerType};
use libcontainer::syscall::syscall::SyscallType;
use libcontainer::user_ns::UserNamespaceConfig;
use nix::unistd::Pid;
use oci_spec::runtime::{Linux, LinuxBuilder, LinuxNamespace, LinuxNamespaceBuilder, LinuxNamespaceType, Process, Spec};

use crate::engine::container_dir::ContainerDir;
use crate::engine::process::exec_launch::{self, Route};
use crate::engine::process::process_io::ProcessIo;
use crate::error::{Error, Result};
use crate::sys::pidfd::PidFd;

/// The namespaces an exec'd process joins, user first: it decides what the
/// others allow. Every one the container's config lists is joined.
const JOIN_ORDER: &[LinuxNamespaceType] = &[
    LinuxNamespaceType::User,
    LinuxNamespaceType::Ipc,
    LinuxNamespaceType::Uts,
    LinuxNamespaceType::Network,
    LinuxNamespaceType::Pid,
    LinuxNamespaceType::Mount,
    LinuxNamespaceType::Cgroup,
    LinuxNamespaceType::Time,
];

/// The spec an exec'd `process` runs with: the container's own confinement
/// (seccomp, cgroup, personality) and its init's namespaces by path. What
/// only the init sets up (mounts, hooks, sysctls, masked paths, resources,
/// time offsets) is left out: the joined namespaces and cgroup carry it.
pub fn tenant_spec(container: &Spec, process: Process, init_pid: i32) -> Result<Spec> {
    let linux = container.linux().as_ref().ok_or_else(|| Error::Invalid("the container's config has no linux section".into()))?;
    let mut spec = container.clone();
    spec.set_process(Some(process)).set_hooks(None).set_mounts(None).set_linux(Some(tenant_linux(linux, init_pid)?));
    Ok(spec)
}

fn tenant_linux(linux: &Linux, init_pid: i32) -> Result<Linux> {
    let invalid = |e: oci_spec::OciSpecError| Error::Invalid(format!("exec spec: {e}"));
    // The builder's defaults list masked paths; the engine applies them only
    // to an init, but say plainly that an exec gets the init's mounts.
    let mut builder =
        LinuxBuilder::default().namespaces(joined_namespaces(linux, init_pid)?).masked_paths(Vec::new()).readonly_paths(Vec::new());
    if let Some(path) = linux.cgroups_path() {
        builder = builder.cgroups_path(path.clone());
    }
    if let Some(personality) = linux.personality() {
        builder = builder.personality(personality.clone());
    }
    if let Some(seccomp) = linux.seccomp() {
        builder = builder.seccomp(seccomp.clone());
    }
    // Kept so the engine sees the same id mappings it created with.
    if let Some(maps) = linux.uid_mappings() {
        builder = builder.uid_mappings(maps.clone());
    }
    if let Some(maps) = linux.gid_mappings() {
        builder = builder.gid_mappings(maps.clone());
    }
    builder.build().map_err(invalid)
}

/// `/proc/<init>/ns/<type>` for every namespace type the config lists.
fn joined_namespaces(linux: &Linux, init_pid: i32) -> Result<Vec<LinuxNamespace>> {
    let listed = linux.namespaces().clone().unwrap_or_default();
    JOIN_ORDER
        .iter()
        .filter(|typ| listed.iter().any(|ns| ns.typ() == **typ))
        .map(|typ| {
            LinuxNamespaceBuilder::default()
                .typ(*typ)
                .path(PathBuf::from(format!("/proc/{init_pid}/ns/{}", proc_ns_name(*typ))))
                .build()
                .map_err(|e| Error::Invalid(format!("exec spec: {e}")))
        })
        .collect()
}

fn proc_ns_name(typ: LinuxNamespaceType) -> &'static str {
    match typ {
        LinuxNamespaceType::Mount => "mnt",
        LinuxNamespaceType::Cgroup => "cgroup",
        LinuxNamespaceType::Uts => "uts",
        LinuxNamespaceType::Ipc => "ipc",
        LinuxNamespaceType::User => "user",
        LinuxNamespaceType::Pid => "pid",
        LinuxNamespaceType::Network => "net",
        LinuxNamespaceType::Time => "time",
    }
}

/// The cgroup an exec'd process joins: the container's, or an existing
/// sub-cgroup of it (`exec --cgroup`), which may not climb out of it.
pub fn cgroup_path(container_path: &Path, sub: Option<&str>) -> Result<PathBuf> {
    let Some(sub) = sub.filter(|s| !s.is_empty() && *s != "/") else {
        return Ok(container_path.to_path_buf());
    };
    let relative = Path::new(sub.trim_start_matches('/'));
    if relative.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        return Err(Error::Invalid(format!("--cgroup {sub:?}: not a sub-cgroup of the container's cgroup")));
    }
    Ok(container_path.join(relative))
}

/// Starts `spec`'s process in `container` and returns its pid once it has
/// exec'd (or the error the engine's init reported); in `sub_cgroup` of
/// the container's cgroup if given.
pub fn spawn(dir: &ContainerDir, container: &Container, spec: Spec, io: ProcessIo, sub_cgroup: Option<&str>, init: &PidFd) -> Result<Pid> {
    let engine_err = |what: &'static str| move |e: &(dyn std::error::Error + 'static)| Error::engine(what, &dir.id, e);
    let linux = spec.linux().as_ref().expect("tenant_spec sets linux");
    let container_cgroup = libcontainer::utils::get_cgroup_path(linux.cgroups_path(), &dir.id);
    let cgroup_config = libcgroups::common::CgroupConfig {
        cgroup_path: cgroup_path(&container_cgroup, sub_cgroup)?,
        systemd_cgroup: container.systemd(),
        container_name: dir.id.clone(),
    };
    let rootfs = spec.root().as_ref().map(|r| r.path().clone()).unwrap_or_default();
    let user_ns_config = UserNamespaceConfig::new(&spec).map_err(|e| engine_err("exec in")(&e))?;
    let sockets = TenantSockets::new(&dir.path());
    let notify_listener = NotifyListener::new(&sockets.notify).map_err(|e| engine_err("exec in")(&e))?;
    let console = match &io.console_socket {
        Some(path) => Some(
            libcontainer::tty::setup_console_socket(&dir.path(), path, &sockets.tty_name())
                .map_err(|e| engine_err("connect console socket for exec in")(&e))?,
        ),
        None => None,
    };
    let (errors_read, errors_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::sys("pipe2 for exec errors", e))?;
    crate::sys::process_setup::write_oom_score_adj(spec.process().as_ref())?;
    crate::sys::process_setup::make_undumpable()?;
    crate::sys::process_setup::drop_supplementary_groups()?;
    let args = ContainerArgs {
        container_type: ContainerType::TenantContainer { exec_notify_fd: errors_write.as_raw_fd() },
        syscall: SyscallType::default(),
        rootfs,
        console_socket: console.as_ref().map(|fd| fd.as_raw_fd()),
        notify_listener,
        preserve_fds: io.preserve_fds,
        // The engine hands its state to a seccomp notify listener.
        container: Some(container.clone()),
        user_ns_config,
        cgroup_config,
        detached: true,
        executor: Box::new(crate::engine::process::executor::RuncWordsExecutor::default()),
        no_pivot: false,
        stdin: raw(&io.stdio.stdin),
        stdout: raw(&io.stdio.stdout),
        stderr: raw(&io.stdio.stderr),
        as_sibling: false,
        pid_file: None,
        spec: Rc::new(spec),
    };
    // Every CPU the container's cpuset allows, not our caller's (the engine
    // then applies `process.execCPUAffinity` over it); and, as runc's exec,
    // the container's name=systemd cgroup.
    let all_cpus = crate::engine::process::cpu_affinity::all_cpus_for_children()?;
    let cgroups = crate::engine::cgroup::fs::hierarchies();
    let named = crate::engine::cgroup::named::join_for(&cgroups, &Default::default(), &dir.id, &args.spec, container.systemd())?;
    let (systemd, relative) = where_to_join(container, &container_cgroup, sub_cgroup, &cgroups, &args.cgroup_config)?;
    let spawned = match exec_launch::route(&args.spec, systemd, &cgroups, &relative) {
        Route::Direct(join) => exec_launch::spawn(&args, &join, &dir.id, init),
        Route::Engine(why) => {
            tracing::debug!("exec through the engine's intermediate process: {why}");
            // The engine opens the namespaces itself, in its intermediate:
            // the init is checked only after (runc's window, left here).
            libcontainer::process::container_main_process::container_main_process(&args).map_err(|e| engine_err("exec in")(&e)).and_then(
                |pid| match exec_launch::init_still_holds_its_pid(init, &dir.id) {
                    Ok(()) => Ok(pid),
                    Err(err) => {
                        crate::engine::process::child_init::kill_and_reap(pid);
                        Err(err)
                    }
                },
            )
        }
    };
    drop(named);
    drop(all_cpus);
    let pid = spawned?;
    crate::engine::process::notify::notify_socket(&dir.path(), &sockets.notify)?;
    drop(errors_write);
    match exec_error(errors_read) {
        Some(reason) => Err(Error::Engine { op: "exec in", id: dir.id.clone(), reason }),
        None => Ok(pid),
    }
}

/// The cgroup driver and path the exec'd process joins: where systemd
/// placed the container, the scope's directory (as runc's exec, which
/// writes the pid there rather than asking systemd), else the config's.
fn where_to_join(
    container: &Container,
    container_cgroup: &Path,
    sub_cgroup: Option<&str>,
    cgroups: &[crate::engine::cgroup::fs::Hierarchy],
    config: &libcgroups::common::CgroupConfig,
) -> Result<(bool, PathBuf)> {
    use crate::engine::cgroup::manager;
    let scope = container
        .pid()
        .filter(|_| manager::placed_by_systemd(container_cgroup, container.systemd(), cgroups))
        .and_then(|init| manager::systemd_scope_of(container_cgroup, init.as_raw()));
    match scope {
        Some(scope) => Ok((false, cgroup_path(&scope, sub_cgroup)?)),
        None => Ok((container.systemd(), config.cgroup_path.clone())),
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
}

fn raw(fd: &Option<OwnedFd>) -> Option<i32> {
    fd.as_ref().map(|fd| fd.as_raw_fd())
}

/// What the tenant's setup wrote before it exec'd, on one line; None when it
/// wrote nothing (it exec'd). The words are the child's, so they stay text.
fn exec_error(read_end: OwnedFd) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    let _ = std::fs::File::from(read_end).read_to_string(&mut text);
    Some(text.trim()).filter(|t| !t.is_empty()).map(|t| t.replace('\n', " "))
}

/// The per-exec socket names in the container's directory, removed on drop.
struct TenantSockets {
    dir: PathBuf,
    notify: PathBuf,
    unique: String,
}

impl TenantSockets {
    fn new(dir: &Path) -> Self {
        let unique = format!("{}-{}", std::process::id(), nanos());
        TenantSockets { dir: dir.to_path_buf(), notify: dir.join(format!("tenant-notify-{unique}.sock")), unique }
    }

    fn tty_name(&self) -> String {
        format!("tenant-tty-{}.sock", self.unique)
    }
}

impl Drop for TenantSockets {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.notify);
        let _ = std::fs::remove_file(self.dir.join(self.tty_name()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::{LinuxSeccompAction, LinuxSeccompBuilder, ProcessBuilder, SpecBuilder};

    fn container_spec(namespaces: &[LinuxNamespaceType]) -> Spec {
        let namespaces = namespaces.iter().map(|t| LinuxNamespaceBuilder::default().typ(*t).build().unwrap()).collect::<Vec<_>>();
        let seccomp = LinuxSeccompBuilder::default().default_action(LinuxSeccompAction::ScmpActErrno).build().unwrap();
        let linux = LinuxBuilder::default()
            .namespaces(namespaces)
            .seccomp(seccomp)
            .cgroups_path(PathBuf::from("/pods/c1"))
            .masked_paths(vec!["/proc/kcore".to_string()])
            .build()
            .unwrap();
        SpecBuilder::default().linux(linux).build().unwrap()
    }

    fn exec_process() -> Process {
        ProcessBuilder::default().args(vec!["sh".to_string()]).build().unwrap()
    }

    #[test]
    fn a_sub_cgroup_stays_inside_the_containers() {
        let base = Path::new("/pods/c1");
        assert_eq!(cgroup_path(base, None).unwrap(), base);
        assert_eq!(cgroup_path(base, Some("/")).unwrap(), base);
        assert_eq!(cgroup_path(base, Some("probe/a")).unwrap(), Path::new("/pods/c1/probe/a"));
        assert_eq!(cgroup_path(base, Some("/probe")).unwrap(), Path::new("/pods/c1/probe"));
        assert!(cgroup_path(base, Some("../c2")).is_err());
        assert!(cgroup_path(base, Some("a/../../c2")).is_err());
    }

    #[test]
    fn keeps_the_containers_seccomp_filter() {
        let spec = tenant_spec(&container_spec(&[LinuxNamespaceType::Pid]), exec_process(), 42).unwrap();
        let linux = spec.linux().as_ref().unwrap();
        assert_eq!(linux.seccomp().as_ref().map(|s| s.default_action()), Some(LinuxSeccompAction::ScmpActErrno));
        assert_eq!(linux.cgroups_path().as_deref(), Some(Path::new("/pods/c1")));
    }

    #[test]
    fn joins_every_listed_namespace_by_the_inits_path_user_first() {
        use LinuxNamespaceType::*;
        let spec = tenant_spec(&container_spec(&[Mount, Time, Cgroup, User, Pid]), exec_process(), 42).unwrap();
        let joined: Vec<_> =
            spec.linux().as_ref().unwrap().namespaces().clone().unwrap().iter().map(|ns| (ns.typ(), ns.path().clone().unwrap())).collect();
        let want = |t, name: &str| (t, PathBuf::from(format!("/proc/42/ns/{name}")));
        assert_eq!(joined, vec![want(User, "user"), want(Pid, "pid"), want(Mount, "mnt"), want(Cgroup, "cgroup"), want(Time, "time")]);
    }

    #[test]
    fn leaves_out_what_only_the_init_sets_up() {
        let spec = tenant_spec(&container_spec(&[LinuxNamespaceType::Mount]), exec_process(), 7).unwrap();
        let linux = spec.linux().as_ref().unwrap();
        assert_eq!(linux.masked_paths().as_deref(), Some(&[][..]));
        assert!(spec.hooks().is_none() && spec.mounts().is_none());
        assert_eq!(spec.process().as_ref().unwrap().args().as_deref(), Some(&["sh".to_string()][..]));
    }
}

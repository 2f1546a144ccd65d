//! Checks of config.json that the engine does late (in the init, with an
//! error that names nothing) or not at all (a `cgroupsPath` with `..`
//! escapes the cgroup root). Each error names the field.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Component, Path};

use oci_spec::runtime::{Hook, LinuxNamespaceType, Spec};

use crate::error::{Error, Result};

/// Every check below, for the config at `config` (used in the messages).
pub fn check(config: &Path, spec: &Spec) -> Result<()> {
    let bad = |reason: String| Error::Config {
        path: config.to_path_buf(),
        reason,
    };
    root_path(spec).map_err(bad)?;
    hooks(spec).map_err(bad)?;
    let Some(linux) = spec.linux() else {
        return Ok(());
    };
    cgroups_path(linux).map_err(bad)?;
    namespaces(linux).map_err(bad)?;
    memory(linux).map_err(bad)
}

type Check = std::result::Result<(), String>;

/// A relative `root.path` must stay inside the bundle (`../../..` would
/// make the host's `/` the rootfs).
fn root_path(spec: &Spec) -> Check {
    let Some(root) = spec.root() else { return Ok(()) };
    let path = root.path();
    if path.is_relative() && escapes(path) {
        return Err(format!("root.path {}: escapes the bundle directory", path.display()));
    }
    Ok(())
}

/// `path`, read lexically, climbs above where it starts.
fn escapes(path: &Path) -> bool {
    let mut depth: i64 = 0;
    for component in path.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// `..` in `cgroupsPath` would put the container's cgroup outside the
/// cgroup root (`/sys/fs/cgroup/<controller>/../../x`).
fn cgroups_path(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(path) = linux.cgroups_path() else { return Ok(()) };
    let text = path.to_string_lossy();
    if text.split(['/', ':']).any(|part| part == "..") {
        return Err(format!("linux.cgroupsPath {text:?}: must not contain \"..\""));
    }
    Ok(())
}

/// A namespace `path` must be a namespace file of the declared type;
/// otherwise the init's setns fails with a bare EINVAL or ENOENT.
fn namespaces(linux: &oci_spec::runtime::Linux) -> Check {
    for (index, ns) in linux.namespaces().iter().flatten().enumerate() {
        let Some(path) = ns.path() else { continue };
        let field = format!("linux.namespaces[{index}].path {}", path.display());
        namespace_file(path, ns.typ()).map_err(|reason| format!("{field}: {reason}"))?;
    }
    Ok(())
}

const NSFS_MAGIC: i64 = 0x6e73_6673;
/// `NS_GET_NSTYPE`: `_IO(0xb7, 0x3)`.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
const CLONE_NEWTIME: i32 = 0x80;

fn namespace_file(path: &Path, typ: LinuxNamespaceType) -> Check {
    // statfs does not open the file, so a FIFO here cannot block us.
    let fs = nix::sys::statfs::statfs(path).map_err(|e| e.desc().to_string())?;
    if fs.filesystem_type().0 as i64 != NSFS_MAGIC {
        return Err("not a namespace file".into());
    }
    let file = File::open(path).map_err(|e| e.to_string())?;
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the fd.
    let kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE) };
    let wanted = match typ {
        LinuxNamespaceType::Mount => libc::CLONE_NEWNS,
        LinuxNamespaceType::Cgroup => libc::CLONE_NEWCGROUP,
        LinuxNamespaceType::Uts => libc::CLONE_NEWUTS,
        LinuxNamespaceType::Ipc => libc::CLONE_NEWIPC,
        LinuxNamespaceType::User => libc::CLONE_NEWUSER,
        LinuxNamespaceType::Pid => libc::CLONE_NEWPID,
        LinuxNamespaceType::Network => libc::CLONE_NEWNET,
        LinuxNamespaceType::Time => CLONE_NEWTIME,
    };
    if kind >= 0 && kind != wanted {
        return Err(format!("not a {typ:?} namespace"));
    }
    Ok(())
}

/// Memory limits are byte counts, or -1 for unlimited; the kernel rejects
/// other negative values only when the engine writes them, mid-create.
fn memory(linux: &oci_spec::runtime::Linux) -> Check {
    let Some(memory) = linux.resources().as_ref().and_then(|r| *r.memory()) else {
        return Ok(());
    };
    let fields = [
        ("limit", memory.limit()),
        ("reservation", memory.reservation()),
        ("swap", memory.swap()),
    ];
    for (name, value) in fields {
        if let Some(v) = value.filter(|v| *v < -1) {
            return Err(format!(
                "linux.resources.memory.{name} {v}: must be -1 (unlimited) or a byte count"
            ));
        }
    }
    Ok(())
}

/// Hook paths must be absolute (spec); those run during create in the
/// runtime's namespaces must exist, or create would fail in a hook wrapper
/// whose error names no field.
fn hooks(spec: &Spec) -> Check {
    let Some(hooks) = spec.hooks() else { return Ok(()) };
    let lists: [(&str, &Option<Vec<Hook>>, bool); 6] = [
        ("prestart", hooks.prestart(), true),
        ("createRuntime", hooks.create_runtime(), true),
        ("createContainer", hooks.create_container(), true),
        ("startContainer", hooks.start_container(), false),
        ("poststart", hooks.poststart(), false),
        ("poststop", hooks.poststop(), false),
    ];
    for (kind, list, on_host_at_create) in lists {
        for (index, hook) in list.iter().flatten().enumerate() {
            let path = hook.path();
            let field = format!("hooks.{kind}[{index}].path {}", path.display());
            if !path.is_absolute() {
                return Err(format!("{field}: must be an absolute path"));
            }
            if on_host_at_create {
                std::fs::metadata(path).map_err(|e| format!("{field}: {e}"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_that_climb_out_escape() {
        assert!(escapes(Path::new("../../..")));
        assert!(escapes(Path::new("rootfs/../../x")));
        assert!(!escapes(Path::new("rootfs/../rootfs2")));
        assert!(!escapes(Path::new("rootfs")));
    }
}

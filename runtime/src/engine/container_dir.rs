//! Layout of the state root: one directory per container id and nothing
//! else, holding the engine's state, the spec the container runs and our
//! metadata. Modes as runc's: the root 0700, container directories 0711,
//! files 0600.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The normalized spec the container runs, which exec reads its process
/// and confinement from.
const CONFIG_FILE: &str = "config.json";
/// Our metadata inside the engine's container directory.
const METADATA_FILE: &str = "rustpod.json";
/// Files the engine writes into the container directory, which carry the
/// container's config (its env, with any secrets in it).
const ENGINE_FILES: [&str; 2] = ["state.json", "youki_config.json"];

const ROOT_MODE: u32 = 0o700;
const CONTAINER_DIR_MODE: u32 = 0o711;
/// State files: only root reads them.
pub const FILE_MODE: u32 = 0o600;

/// What we remember about a container beyond the engine's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    /// The bundle the user gave, as runc reports it.
    pub bundle: PathBuf,
    /// The absolute rootfs path.
    pub rootfs: PathBuf,
    /// poststart hooks, which `start` runs itself once the user's program
    /// runs (the engine would run them before the startContainer hooks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub poststart: Vec<oci_spec::runtime::Hook>,
    /// The init runs startContainer hooks and then waits at our barrier
    /// for `start` (see `start_barrier`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_barrier: bool,
    /// Our own init runs startContainer hooks and answers on the state
    /// directory's socket once they passed (see `start_report`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_report: bool,
    /// The user's process.env has no HOME: the spec we run carries the one
    /// we found for the init's user, and an exec looks up its own instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub added_home: bool,
    /// The container's own mount namespace: `delete` kills only the
    /// processes in it, not everything else its cgroup may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_ns: Option<crate::engine::stop::FileId>,
    /// The init leads a PID namespace made for it (not joined): once it is
    /// gone, so is every process of the container, and `delete` need not
    /// look for them in the cgroup.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_pid_ns: bool,
    /// When the init started (`/proc/<pid>/stat`): the state's pid names
    /// the init only while the process holding it started then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_start: Option<u64>,
}

/// The paths that belong to one container under a state root.
#[derive(Debug, Clone)]
pub struct ContainerDir {
    pub root: PathBuf,
    pub id: String,
}

impl ContainerDir {
    pub fn new(root: &Path, id: &str) -> Result<Self> {
        validate_id(id)?;
        Ok(ContainerDir { root: root.to_path_buf(), id: id.to_string() })
    }

    /// The engine's directory for this container (state.json lives here).
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.id)
    }

    /// The spec the container runs (see [`CONFIG_FILE`]).
    pub fn config_path(&self) -> PathBuf {
        self.path().join(CONFIG_FILE)
    }

    /// Writes the spec the container runs (0600: it holds the process's env).
    pub fn write_config(&self, spec: &oci_spec::runtime::Spec) -> Result<()> {
        let data = serde_json::to_vec(spec).map_err(|e| Error::Invalid(e.to_string()))?;
        crate::sys::atomic_file::write(&self.config_path(), &data, FILE_MODE)
    }

    /// The cgroup path the container was (or was about to be) created with,
    /// from the spec it runs.
    pub fn cgroups_path(&self) -> Option<PathBuf> {
        let spec = crate::engine::engine_bundle::parse_config(&self.config_path()).ok()?;
        spec.linux().as_ref()?.cgroups_path().clone()
    }

    /// Creating the container's directory is the exclusive claim on the id:
    /// of two concurrent creates with one id, exactly one gets past here.
    pub fn claim(&self) -> Result<()> {
        match fs::DirBuilder::new().mode(CONTAINER_DIR_MODE).create(self.path()) {
            Ok(()) => set_mode(&self.path(), CONTAINER_DIR_MODE),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::AlreadyExists(self.id.clone())),
            Err(e) => Err(Error::io("create directory", self.path(), e)),
        }
    }

    pub fn exists(&self) -> bool {
        self.path().join("state.json").exists()
    }

    pub fn load(&self) -> Result<Container> {
        if !self.path().exists() {
            return Err(Error::NotFound(self.id.clone()));
        }
        let mut container = Container::load(self.path()).map_err(|e| Error::engine("load state of", &self.id, &e))?;
        self.forget_a_reused_pid(&mut container);
        Ok(container)
    }

    /// The engine's status asks only whether the state's pid is alive. Once
    /// the init is reaped (by a shim, or `run`), the kernel may give that pid
    /// to any other process, which `kill`, `exec` and `delete` would then
    /// signal or join: a pid whose process did not start when the init did
    /// is not the container's, which is stopped, as runc's start time says.
    pub fn forget_a_reused_pid(&self, container: &mut Container) {
        let (Some(pid), Some(started)) = (container.pid(), self.metadata().and_then(|m| m.init_start)) else { return };
        if crate::sys::proc_stat::read(pid.as_raw()).map(|s| s.start_time) != Some(started) {
            container.state.pid = None;
            container.set_status(ContainerStatus::Stopped);
        }
    }

    pub fn save_metadata(&self, meta: &Metadata) -> Result<()> {
        let data = serde_json::to_vec(meta).expect("metadata serializes");
        crate::sys::atomic_file::write(&self.path().join(METADATA_FILE), &data, FILE_MODE)
    }

    /// Narrows what the engine created with the umask's modes: the
    /// container directory to 0711 and its state files to 0600.
    pub fn restrict_engine_files(&self) -> Result<()> {
        set_mode(&self.path(), CONTAINER_DIR_MODE)?;
        for name in ENGINE_FILES {
            match set_mode(&self.path().join(name), FILE_MODE) {
                Err(Error::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    pub fn metadata(&self) -> Option<Metadata> {
        let data = fs::read(self.path().join(METADATA_FILE)).ok()?;
        serde_json::from_slice(&data).ok()
    }

    /// Removes the container's directory, if the engine left it.
    pub fn remove_all(&self) -> Result<()> {
        match fs::remove_dir_all(self.path()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", self.path(), e)),
        }
    }
}

/// Creates the state root (and missing parents) 0700, and narrows an
/// existing one to 0700: other users must not list or read containers.
pub fn ensure_root(root: &Path) -> Result<()> {
    fs::DirBuilder::new().recursive(true).mode(ROOT_MODE).create(root).map_err(|e| Error::io("create state root", root, e))?;
    set_mode(root, ROOT_MODE)
}

/// chmod, which (unlike a mode given at creation) ignores the umask.
pub fn set_mode(path: &Path, mode: u32) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|e| Error::io("chmod", path, e))
}

/// Lists the ids of the containers under `root`, sorted.
pub fn list_ids(root: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read directory", root, e)),
    };
    let mut ids: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("state.json").exists())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| validate_id(name).is_ok())
        .collect();
    ids.sort();
    Ok(ids)
}

/// Accepts the ids runc accepts: letters, digits and `_ + - .`, and not `.`/`..`.
pub fn validate_id(id: &str) -> Result<()> {
    let invalid = |reason: &str| Error::InvalidId { id: id.to_string(), reason: reason.to_string() };
    if id.is_empty() {
        return Err(invalid("it is empty"));
    }
    if id == "." || id == ".." {
        return Err(invalid("it is not a valid file name"));
    }
    if id.len() > 1024 {
        return Err(invalid("it is longer than 1024 bytes"));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || "_+-.".contains(*c))) {
        return Err(invalid(&format!("character {c:?} is not allowed")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_runc_rules() {
        assert!(validate_id("abc-1.2_x+y").is_ok());
        assert!(validate_id("").is_err());
        assert!(validate_id("..").is_err());
        assert!(validate_id("a/b").is_err());
        assert!(validate_id("@x").is_err());
    }
}

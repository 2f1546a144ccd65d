//! Layout of the state root: one directory per container (owned by the
//! engine), our own metadata beside the engine's, and the engine bundles.
//! Modes as runc's: the root 0700, container directories 0711, files 0600.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use libcontainer::container::Container;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Holds the engine copies of the bundles' configs. `@` cannot appear in a
/// container id, so this never clashes with a container directory.
const ENGINE_BUNDLES: &str = "@engine";
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
    /// startContainer hooks, which `start` runs in the container's
    /// namespaces with the OCI state libcontainer would get wrong.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start_container: Vec<oci_spec::runtime::Hook>,
    /// The user's process.env has no HOME: the engine copy carries the one
    /// we found for the init's user, and an exec looks up its own instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub added_home: bool,
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
        Ok(ContainerDir {
            root: root.to_path_buf(),
            id: id.to_string(),
        })
    }

    /// The engine's directory for this container (state.json lives here).
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.id)
    }

    /// The directory holding the engine's copy of config.json.
    pub fn engine_bundle(&self) -> PathBuf {
        self.engine_root().join(&self.id)
    }

    /// The parent of every engine bundle under this root (also the lock
    /// that orders cgroup parent removal against creates).
    pub fn engine_root(&self) -> PathBuf {
        self.root.join(ENGINE_BUNDLES)
    }

    pub fn exists(&self) -> bool {
        self.path().join("state.json").exists()
    }

    pub fn load(&self) -> Result<Container> {
        if !self.path().exists() {
            return Err(Error::NotFound(self.id.clone()));
        }
        Container::load(self.path()).map_err(|e| Error::engine("load state of", &self.id, &e))
    }

    pub fn save_metadata(&self, meta: &Metadata) -> Result<()> {
        let data = serde_json::to_vec(meta).expect("metadata serializes");
        crate::atomic_file::write(&self.path().join(METADATA_FILE), &data, FILE_MODE)
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

    /// Removes what the engine does not: our engine bundle and, if the engine
    /// left it, the container directory.
    pub fn remove_all(&self) -> Result<()> {
        for dir in [self.engine_bundle(), self.path()] {
            match fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", dir, e)),
            }
        }
        Ok(())
    }
}

/// Creates the state root (and missing parents) 0700, and narrows an
/// existing one to 0700: other users must not list or read containers.
pub fn ensure_root(root: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(ROOT_MODE)
        .create(root)
        .map_err(|e| Error::io("create state root", root, e))?;
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
    let invalid = |reason: &str| Error::InvalidId {
        id: id.to_string(),
        reason: reason.to_string(),
    };
    if id.is_empty() {
        return Err(invalid("it is empty"));
    }
    if id == "." || id == ".." {
        return Err(invalid("it is not a valid file name"));
    }
    if id.len() > 1024 {
        return Err(invalid("it is longer than 1024 bytes"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_+-.".contains(*c)))
    {
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
        assert!(validate_id("@engine").is_err());
    }
}

//! Reads a bundle's config.json with errors that name the field, and writes
//! the copy the engine runs: absolute rootfs, a default cgroup, runc's
//! propagation vocabulary and our per-mount propagation step.

use std::fs;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Hooks, Mount, Spec};

use crate::container_dir::ContainerDir;
use crate::error::{Error, Result};
use crate::{hook_state, home_env, mount_propagation};

/// A parsed bundle: the user's path and spec, with the rootfs made absolute.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub path: PathBuf,
    pub spec: Spec,
    pub rootfs: PathBuf,
}

/// Loads and validates `<bundle>/config.json`.
pub fn load(bundle: &Path) -> Result<Bundle> {
    let path = absolute_dir(bundle)?;
    let config = path.join("config.json");
    let spec = parse_config(&config)?;
    check_version(&config, &spec)?;
    crate::validate::check(&config, &spec)?;
    let rootfs = resolve_rootfs(&path, &config, &spec)?;
    check_process(&config, &spec)?;
    crate::cwd::check_in_rootfs(&config, &spec, &rootfs)?;
    Ok(Bundle { path, spec, rootfs })
}

/// Parses a config.json, naming the file and the JSON path of a bad field.
pub fn parse_config(config: &Path) -> Result<Spec> {
    let data = fs::read(config).map_err(|e| Error::io("read", config, e))?;
    parse_spec_bytes(&data).map_err(|reason| Error::Config {
        path: config.to_path_buf(),
        reason,
    })
}

/// Parses spec JSON; the error text starts with the field path when known.
pub fn parse_spec_bytes(data: &[u8]) -> std::result::Result<Spec, String> {
    let de = &mut serde_json::Deserializer::from_slice(data);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        if field.is_empty() || field == "." {
            format!("invalid config: {inner}")
        } else {
            format!("invalid field {field}: {inner}")
        }
    })
}

fn absolute_dir(bundle: &Path) -> Result<PathBuf> {
    let path = fs::canonicalize(bundle).map_err(|e| Error::Bundle {
        path: bundle.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !path.is_dir() {
        return Err(Error::Bundle {
            path,
            reason: "not a directory".into(),
        });
    }
    Ok(path)
}

fn check_version(config: &Path, spec: &Spec) -> Result<()> {
    if spec.version().starts_with("1.") {
        return Ok(());
    }
    Err(Error::Config {
        path: config.to_path_buf(),
        reason: format!(
            "unsupported ociVersion {:?}: only 1.x is supported",
            spec.version()
        ),
    })
}

fn resolve_rootfs(bundle: &Path, config: &Path, spec: &Spec) -> Result<PathBuf> {
    let root = spec.root().as_ref().ok_or_else(|| Error::Config {
        path: config.to_path_buf(),
        reason: "root is missing".into(),
    })?;
    let joined = bundle.join(root.path());
    let rootfs = fs::canonicalize(&joined).map_err(|e| Error::Config {
        path: config.to_path_buf(),
        reason: format!("root.path {}: {e}", joined.display()),
    })?;
    if !rootfs.is_dir() {
        return Err(Error::Config {
            path: config.to_path_buf(),
            reason: format!("root.path {}: not a directory", rootfs.display()),
        });
    }
    Ok(rootfs)
}

fn check_process(config: &Path, spec: &Spec) -> Result<()> {
    let args = spec.process().as_ref().and_then(|p| p.args().clone());
    match args {
        Some(args) if !args.is_empty() => Ok(()),
        _ => Err(Error::Config {
            path: config.to_path_buf(),
            reason: "process.args must name the program to run".into(),
        }),
    }
}

/// Options that shape the engine copy of the spec.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    pub systemd_cgroup: bool,
}

/// Writes the engine's config.json for `bundle` under the container's state
/// and returns the directory that holds it and the hooks `start` runs.
pub fn write_engine_bundle(
    dir: &ContainerDir,
    bundle: &Bundle,
    opts: &EngineOptions,
) -> Result<(PathBuf, StartHooks)> {
    let mut spec = engine_spec(&dir.id, bundle, opts)?;
    let start_hooks = take_start_hooks(&mut spec);
    let out = dir.engine_bundle();
    fs::create_dir_all(&out).map_err(|e| Error::io("create directory", &out, e))?;
    let data = serde_json::to_vec(&spec).map_err(|e| Error::Invalid(e.to_string()))?;
    // It holds the container's env: root only, as runc's state.json.
    crate::atomic_file::write(&out.join("config.json"), &data, crate::container_dir::FILE_MODE)?;
    Ok((out, start_hooks))
}

/// The spec the engine runs, derived from the user's.
pub fn engine_spec(id: &str, bundle: &Bundle, opts: &EngineOptions) -> Result<Spec> {
    let config = bundle.path.join("config.json");
    let mut spec = bundle.spec.clone();
    if let Some(root) = spec.root_mut() {
        root.set_path(bundle.rootfs.clone());
    }
    if let Some(process) = spec.process_mut() {
        home_env::set_if_missing(process, &bundle.rootfs);
    }
    let linux = spec.linux_mut().as_mut().ok_or_else(|| Error::Config {
        path: config.clone(),
        reason: "linux is missing".into(),
    })?;
    default_cgroups_path(linux, id, opts.systemd_cgroup);
    deny_unlisted_devices(linux);
    normalize_rootfs_propagation(linux, &config)?;

    let propagations = match spec.mounts_mut() {
        Some(mounts) => prepare_mounts(mounts, &config)?,
        None => Vec::new(),
    };
    // After prepare_mounts: these bind sources appear only once the
    // engine has made the container's cgroup.
    crate::cgroup_mount::rewrite(&mut spec);
    if let Some(hooks) = spec.hooks_mut() {
        wrap_host_hooks(hooks, &bundle.path);
    }
    if !propagations.is_empty() {
        let hook = mount_propagation::hook(&bundle.rootfs, &propagations);
        let hooks = spec.hooks_mut().get_or_insert_with(Hooks::default);
        let mut create_container = hooks.create_container().clone().unwrap_or_default();
        create_container.insert(0, hook);
        hooks.set_create_container(Some(create_container));
    }
    Ok(spec)
}

/// Routes every hook that runs before pivot_root or in the runtime's
/// namespaces through the wrapper that reports the user's bundle.
/// startContainer hooks run inside the container and are left alone.
fn wrap_host_hooks(hooks: &mut Hooks, bundle: &Path) {
    let wrap_all = |list: &Option<Vec<oci_spec::runtime::Hook>>| {
        list.as_ref()
            .map(|l| l.iter().map(|h| hook_state::wrap(h, bundle)).collect())
    };
    hooks.set_prestart(wrap_all(hooks.prestart()));
    hooks.set_create_runtime(wrap_all(hooks.create_runtime()));
    hooks.set_create_container(wrap_all(hooks.create_container()));
    hooks.set_poststart(wrap_all(hooks.poststart()));
    // ... and taken out for `start` to run itself, see [`take_start_hooks`].
    hooks.set_poststop(wrap_all(hooks.poststop()));
}

/// The hooks `start` runs itself, taken out of the engine's spec.
#[derive(Debug, Clone, Default)]
pub struct StartHooks {
    pub start_container: Vec<oci_spec::runtime::Hook>,
    pub poststart: Vec<oci_spec::runtime::Hook>,
}

/// libcontainer runs poststart as soon as it has signalled the init, before
/// the startContainer hooks and the user's program, and gives startContainer
/// hooks a state with the engine copy's bundle and no pid; `start` runs both
/// itself (see `start_hooks.rs`).
pub fn take_start_hooks(spec: &mut Spec) -> StartHooks {
    let Some(hooks) = spec.hooks_mut() else {
        return StartHooks::default();
    };
    let taken = StartHooks {
        start_container: hooks.start_container().clone().unwrap_or_default(),
        poststart: hooks.poststart().clone().unwrap_or_default(),
    };
    hooks.set_start_container(None);
    hooks.set_poststart(None);
    taken
}

/// runc puts a container without `cgroupsPath` under `/<runtime>/<id>`; the
/// engine would pick `:youki:<id>`, which is a systemd name and wrong here.
fn default_cgroups_path(linux: &mut oci_spec::runtime::Linux, id: &str, systemd: bool) {
    let empty = linux
        .cgroups_path()
        .as_ref()
        .is_none_or(|p| p.as_os_str().is_empty());
    if empty {
        let path = if systemd {
            format!("system.slice:rustpod:{id}")
        } else {
            crate::cgroup::default_path(id).display().to_string()
        };
        linux.set_cgroups_path(Some(PathBuf::from(path)));
    }
}

/// runc's device cgroup starts from deny-all whatever the config lists;
/// libcgroups only adds the config's rules and its default allow-list to
/// the parent's list (usually allow-all). A leading deny-all makes them the
/// same; an allow-all rule after it (privileged) still allows everything.
fn deny_unlisted_devices(linux: &mut oci_spec::runtime::Linux) {
    let deny_all = oci_spec::runtime::LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()
        .expect("a literal rule builds");
    let resources = linux.resources_mut().get_or_insert_with(Default::default);
    let mut devices = resources.devices().clone().unwrap_or_default();
    if devices.first() != Some(&deny_all) {
        devices.insert(0, deny_all);
    }
    resources.set_devices(Some(devices));
}

/// The engine always applies the root propagation recursively and only
/// knows the short names; map the `r`-forms the spec allows onto them.
fn normalize_rootfs_propagation(linux: &mut oci_spec::runtime::Linux, config: &Path) -> Result<()> {
    let Some(value) = linux.rootfs_propagation().clone() else {
        return Ok(());
    };
    let short = match value.as_str() {
        "" => None,
        "shared" | "rshared" => Some("shared"),
        "slave" | "rslave" => Some("slave"),
        "private" | "rprivate" => Some("private"),
        "unbindable" | "runbindable" => Some("unbindable"),
        other => {
            return Err(Error::Config {
                path: config.to_path_buf(),
                reason: format!("linux.rootfsPropagation {other:?} is not a propagation type"),
            })
        }
    };
    linux.set_rootfs_propagation(short.map(str::to_string));
    Ok(())
}

/// Resolves bind sources, checks they exist, and takes the propagation
/// options out of each mount: the engine drops them, so our hook applies them.
fn prepare_mounts(
    mounts: &mut [Mount],
    config: &Path,
) -> Result<Vec<mount_propagation::MountPropagation>> {
    let mut propagations = Vec::new();
    for (index, mount) in mounts.iter_mut().enumerate() {
        check_destination(mount, index, config)?;
        if is_bind(mount) {
            resolve_bind_source(mount, index, config)?;
        }
        if let Some(options) = mount.options().clone() {
            let (rest, flags) = mount_propagation::split_options(&options);
            if !flags.is_empty() {
                propagations.push(mount_propagation::MountPropagation {
                    destination: mount.destination().clone(),
                    flags,
                });
                mount.set_options(Some(rest));
            }
        }
    }
    Ok(propagations)
}

fn check_destination(mount: &Mount, index: usize, config: &Path) -> Result<()> {
    let dest = mount.destination();
    let bad = |reason: &str| Error::Config {
        path: config.to_path_buf(),
        reason: format!("mounts[{index}].destination {}: {reason}", dest.display()),
    };
    if !dest.is_absolute() {
        return Err(bad("must be an absolute path"));
    }
    if dest.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(bad("must not contain \"..\""));
    }
    Ok(())
}

pub fn is_bind(mount: &Mount) -> bool {
    mount.typ().as_deref() == Some("bind")
        || mount
            .options()
            .as_ref()
            .is_some_and(|o| o.iter().any(|x| x == "bind" || x == "rbind"))
}

fn resolve_bind_source(mount: &mut Mount, index: usize, config: &Path) -> Result<()> {
    let Some(source) = mount.source().clone() else {
        return Err(Error::Config {
            path: config.to_path_buf(),
            reason: format!("mounts[{index}]: a bind mount needs a source"),
        });
    };
    let real = fs::canonicalize(&source).map_err(|e| Error::Config {
        path: config.to_path_buf(),
        reason: format!(
            "mounts[{index}].source {} (for {}): {e}",
            source.display(),
            mount.destination().display()
        ),
    })?;
    mount.set_source(Some(real));
    Ok(())
}

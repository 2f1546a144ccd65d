//! Reads a bundle's config.json with errors that name the field, and makes
//! the spec the engine runs: absolute rootfs, a default cgroup, runc's
//! propagation vocabulary and our per-mount propagation step.

use std::fs;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Hook, Hooks, Mount, Spec};

use crate::engine::mount::{cgroup_flags as cgroup_mount_flags, copyup as mount_copyup, propagation as mount_propagation, rootfs_hook};
use crate::engine::mount::{sb_flags as mount_sb_flags, symfollow as mount_symfollow};
use crate::engine::process::home_env;
use crate::engine::{hook_state, start_barrier};
use crate::error::{Error, Result};

/// A parsed bundle: the user's path and spec, with the rootfs made absolute
/// and each bind's source resolved.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub path: PathBuf,
    pub spec: Spec,
    pub rootfs: PathBuf,
    /// `linux.resources.pids.limit` allows the init alone: an explicit 0
    /// or 1 (see `spec_support`), which `pids_zero` writes after create.
    pub pids_init_only: bool,
}

/// Loads and validates `<bundle>/config.json`.
pub fn load(bundle: &Path) -> Result<Bundle> {
    let path = absolute_dir(bundle)?;
    let config = path.join("config.json");
    let (mut spec, raw) = parse_config_raw(&config)?;
    check_version(&config, &spec)?;
    crate::engine::validate::check(&config, &spec)?;
    let rootfs = resolve_rootfs(&path, &config, &spec)?;
    crate::engine::validate::check_in_rootfs(&config, &spec, &rootfs)?;
    check_process(&config, &spec)?;
    crate::engine::process::cwd::check_in_rootfs(&config, &spec, &rootfs)?;
    check_mounts(spec.mounts_mut().iter_mut().flatten(), &path, &config)?;
    let pids_init_only = crate::engine::spec_support::pids_limit_is_init_only(&raw);
    Ok(Bundle { path, spec, rootfs, pids_init_only })
}

/// Parses a config.json, naming the file and the JSON path of a bad field.
pub fn parse_config(config: &Path) -> Result<Spec> {
    parse_config_raw(config).map(|(spec, _)| spec)
}

/// [`parse_config`], with the JSON as written: oci-spec cannot tell some
/// absent fields from their defaults.
fn parse_config_raw(config: &Path) -> Result<(Spec, serde_json::Value)> {
    let data = fs::read(config).map_err(|e| Error::io("read", config, e))?;
    let bad = |reason| Error::Config { path: config.to_path_buf(), reason };
    let whole = |e| bad(SpecError::Whole(e).to_string());
    let mut raw = serde_json::from_slice(&data).map_err(whole)?;
    let data = match crate::engine::spec_support::to_oci_spec_names(&mut raw) {
        true => serde_json::to_vec(&raw).map_err(whole)?,
        false => data,
    };
    let spec = parse_spec_bytes(&data).map_err(|e| bad(e.to_string()))?;
    Ok((spec, raw))
}

/// Spec JSON serde could not take, naming the field's JSON path when known.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("invalid config: {0}")]
    Whole(serde_json::Error),
    #[error("invalid field {field}: {err}")]
    Field { field: String, err: serde_json::Error },
}

/// Parses spec JSON.
pub fn parse_spec_bytes(data: &[u8]) -> std::result::Result<Spec, SpecError> {
    let de = &mut serde_json::Deserializer::from_slice(data);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        if field.is_empty() || field == "." {
            SpecError::Whole(inner)
        } else {
            SpecError::Field { field, err: inner }
        }
    })
}

fn absolute_dir(bundle: &Path) -> Result<PathBuf> {
    let path = fs::canonicalize(bundle).map_err(|e| Error::Bundle { path: bundle.to_path_buf(), reason: e.to_string() })?;
    if !path.is_dir() {
        return Err(Error::Bundle { path, reason: "not a directory".into() });
    }
    Ok(path)
}

fn check_version(config: &Path, spec: &Spec) -> Result<()> {
    if spec.version().starts_with("1.") {
        return Ok(());
    }
    Err(Error::Config { path: config.to_path_buf(), reason: format!("unsupported ociVersion {:?}: only 1.x is supported", spec.version()) })
}

fn resolve_rootfs(bundle: &Path, config: &Path, spec: &Spec) -> Result<PathBuf> {
    let root = spec.root().as_ref().ok_or_else(|| Error::Config { path: config.to_path_buf(), reason: "root is missing".into() })?;
    let joined = bundle.join(root.path());
    let rootfs = fs::canonicalize(&joined)
        .map_err(|e| Error::Config { path: config.to_path_buf(), reason: format!("root.path {}: {e}", joined.display()) })?;
    if !rootfs.is_dir() {
        return Err(Error::Config { path: config.to_path_buf(), reason: format!("root.path {}: not a directory", rootfs.display()) });
    }
    Ok(rootfs)
}

fn check_process(config: &Path, spec: &Spec) -> Result<()> {
    let args = spec.process().as_ref().and_then(|p| p.args().clone());
    match args {
        Some(args) if !args.is_empty() => Ok(()),
        _ => Err(Error::Config { path: config.to_path_buf(), reason: "process.args must name the program to run".into() }),
    }
}

/// Options that shape the spec the engine runs.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions<'a> {
    pub systemd_cgroup: bool,
    /// The host's cgroup hierarchies, as the command read them.
    pub cgroups: &'a [crate::engine::cgroup::fs::Hierarchy],
    /// Our rootfs steps make the rootfs (`engine::rootfs::own`): the engine
    /// spec needs none of the workarounds for the engine's.
    pub own_rootfs: bool,
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
    let linux = spec.linux_mut().as_mut().ok_or_else(|| Error::Config { path: config.clone(), reason: "linux is missing".into() })?;
    default_cgroups_path(linux, id, opts.systemd_cgroup);
    deny_unlisted_devices(linux);
    drop_ptmx_node(linux);
    unlimited_pids_for_the_engine(linux);
    normalize_rootfs_propagation(linux, &config)?;

    let (propagations, taken) = match spec.mounts_mut() {
        Some(mounts) if opts.own_rootfs => {
            check_kernel_fs_targets(mounts, &bundle.rootfs)?;
            take_propagations(mounts);
            Default::default()
        }
        Some(mounts) => {
            check_kernel_fs_targets(mounts, &bundle.rootfs)?;
            crate::engine::mount::tmpfs_mode::from_the_image(mounts, &bundle.rootfs);
            let propagations = take_propagations(mounts);
            // The copy first, into the tmpfs while it is still writable.
            let mut taken = mount_copyup::take(mounts);
            taken.extend(rootfs_hook::take_options(mounts, mount_sb_flags::is_sb_flag));
            taken.extend(rootfs_hook::take_options(mounts, mount_symfollow::is_symfollow));
            (propagations, taken)
        }
        None => Default::default(),
    };
    // Before the rewrite below, which turns some cgroup mounts into binds.
    let cgroup_flags = if opts.own_rootfs { Vec::new() } else { cgroup_mount_flags::wanted(&spec, opts.cgroups) };
    // After load resolved the binds: these bind sources appear only once the
    // engine has made the container's cgroup.
    if !opts.own_rootfs {
        crate::engine::mount::cgroup_ns::rewrite(&mut spec, opts.cgroups);
    }
    if let Some(hooks) = spec.hooks_mut() {
        wrap_hooks(hooks, &bundle.path, opts.own_rootfs);
    }
    // One exec for all: a cgroup mount's flags, superblock flags, symfollow,
    // then propagation.
    let entries = cgroup_flags
        .iter()
        .map(|c| (c.destination.as_path(), c.options.as_slice()))
        .chain(taken.iter().map(|(destination, options)| (destination.as_path(), options.as_slice())))
        .chain(propagations.iter().map(|p| (p.destination.as_path(), p.flags.as_slice())));
    if let Some(hook) = rootfs_hook::hook(&bundle.rootfs, entries) {
        prepend_create_container(&mut spec, hook);
    }
    Ok(spec)
}

/// A pids limit of 0 (explicit, or how oci-spec reads a missing one) or 1
/// goes to the engine as no limit: in a cgroup that holds the init alone,
/// nothing the engine or our createContainer steps fork before the
/// container starts could run ("failed to run hooks"). `pids_zero` writes
/// the limit once the init exists, before `start`.
fn unlimited_pids_for_the_engine(linux: &mut oci_spec::runtime::Linux) {
    let Some(resources) = linux.resources_mut() else { return };
    if let Some(pids) = resources.pids_mut() {
        if (0..=1).contains(&pids.limit()) {
            pids.set_limit(-1);
        }
    }
}

/// Our own createContainer steps run before the user's hooks.
pub(crate) fn prepend_create_container(spec: &mut Spec, hook: Hook) {
    let hooks = spec.hooks_mut().get_or_insert_with(Hooks::default);
    let mut create_container = hooks.create_container().clone().unwrap_or_default();
    create_container.insert(0, hook);
    hooks.set_create_container(Some(create_container));
}

/// Routes every hook through the wrapper that reports the user's bundle.
/// startContainer hooks stay in the engine's spec, so the init runs them as
/// confined as the user's process. Our own init (`own_rootfs`) gives them
/// their state and tells `start` they passed (`start_report`); the engine's
/// needs the wrapper and our barrier at their end (`start_barrier`).
fn wrap_hooks(hooks: &mut Hooks, bundle: &Path, own_rootfs: bool) {
    let wrap_all = |list: &Option<Vec<Hook>>| list.as_ref().map(|l| l.iter().map(|h| hook_state::wrap(h, bundle)).collect());
    hooks.set_prestart(wrap_all(hooks.prestart()));
    hooks.set_create_runtime(wrap_all(hooks.create_runtime()));
    hooks.set_create_container(wrap_all(hooks.create_container()));
    hooks.set_poststart(wrap_all(hooks.poststart()));
    // ... and taken out for `start` to run itself, see [`take_poststart`].
    hooks.set_poststop(wrap_all(hooks.poststop()));
    let start_container: Vec<Hook> = hooks.start_container().clone().unwrap_or_default();
    if !start_container.is_empty() && !own_rootfs {
        let mut wrapped: Vec<Hook> = start_container.iter().map(|h| hook_state::wrap_start_container(h, bundle)).collect();
        wrapped.push(start_barrier::hook());
        hooks.set_start_container(Some(wrapped));
    }
}

/// Whether the init of `spec` runs startContainer hooks after `start`.
pub fn has_start_container_hooks(spec: &Spec) -> bool {
    spec.hooks().as_ref().and_then(|h| h.start_container().as_ref()).is_some_and(|l| !l.is_empty())
}

/// libcontainer runs poststart as soon as it has signalled the init, before
/// the startContainer hooks and the user's program: `start` runs them
/// itself once that program runs.
pub fn take_poststart(spec: &mut Spec) -> Vec<Hook> {
    let Some(hooks) = spec.hooks_mut() else {
        return Vec::new();
    };
    let taken = hooks.poststart().clone().unwrap_or_default();
    hooks.set_poststart(None);
    taken
}

/// runc puts a container without `cgroupsPath` under `/<runtime>/<id>`; the
/// engine would pick `:youki:<id>`, which is a systemd name and wrong here.
pub(crate) fn default_cgroups_path(linux: &mut oci_spec::runtime::Linux, id: &str, systemd: bool) {
    let empty = linux.cgroups_path().as_ref().is_none_or(|p| p.as_os_str().is_empty());
    if empty {
        let path = if systemd {
            format!("system.slice:rustpod:{id}")
        } else {
            crate::engine::cgroup::manager::default_path(id).display().to_string()
        };
        linux.set_cgroups_path(Some(PathBuf::from(path)));
    }
}

/// runc's device cgroup starts from deny-all whatever the config lists;
/// libcgroups only adds the config's rules and its default allow-list to
/// the parent's list (usually allow-all). A leading deny-all makes them the
/// same; an allow-all rule after it (privileged) still allows everything.
/// `/dev/ptmx` is the runtime's symlink to `pts/ptmx` (runtime-spec, config-linux "Default
/// Devices"), which the engine makes by deleting what is there: a device node listed at that
/// path (containerd lists all the host's for a privileged container) is dropped, since in a
/// user namespace the engine binds device nodes and cannot delete the bind ("could not delete
/// /dev/ptmx"). Its cgroup rule is untouched.
fn drop_ptmx_node(linux: &mut oci_spec::runtime::Linux) {
    if let Some(devices) = linux.devices_mut() {
        devices.retain(|d| d.path() != Path::new("/dev/ptmx"));
    }
}

fn deny_unlisted_devices(linux: &mut oci_spec::runtime::Linux) {
    let deny_all =
        oci_spec::runtime::LinuxDeviceCgroupBuilder::default().allow(false).access("rwm").build().expect("a literal rule builds");
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

/// Checks each destination and resolves each bind's source, once per
/// command: both routes and the route's decision read the resolved spec.
fn check_mounts<'a>(mounts: impl Iterator<Item = &'a mut Mount>, bundle: &Path, config: &Path) -> Result<()> {
    for (index, mount) in mounts.enumerate() {
        check_destination(mount, index, config)?;
        if is_bind(mount) {
            resolve_bind_source(mount, index, bundle, config)?;
        }
    }
    Ok(())
}

/// Takes the propagation options out of each mount: the engine drops
/// them, so our hook applies them.
fn take_propagations(mounts: &mut [Mount]) -> Vec<mount_propagation::MountPropagation> {
    let mut propagations = Vec::new();
    for mount in mounts.iter_mut() {
        if let Some(options) = mount.options().clone() {
            let (rest, flags) = mount_propagation::split_options(&options);
            if !flags.is_empty() {
                propagations.push(mount_propagation::MountPropagation { destination: mount.destination().clone(), flags });
                mount.set_options(Some(rest));
            }
        }
    }
    propagations
}

/// proc and sysfs may only go on a real directory: mounted over a symlink
/// they would follow it (CVE-2019-19921's class). The engine fails such a
/// mount with only "failed to prepare rootfs"; runc's words here.
fn check_kernel_fs_targets(mounts: &[Mount], rootfs: &Path) -> Result<()> {
    for mount in mounts {
        let Some(fs) = mount.typ().as_deref().filter(|t| matches!(*t, "proc" | "sysfs")) else {
            continue;
        };
        let dest = mount.destination();
        let target = rootfs.join(dest.strip_prefix("/").unwrap_or(dest));
        if fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::Invalid(format!(
                "error mounting {fs:?} to rootfs at {:?}: filesystem {fs:?} must be mounted on ordinary directory",
                dest.display().to_string()
            )));
        }
    }
    Ok(())
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
    mount.typ().as_deref() == Some("bind") || mount.options().as_ref().is_some_and(|o| o.iter().any(|x| x == "bind" || x == "rbind"))
}

/// A relative source is the bundle's, as runc (which chdirs into the
/// bundle) reads it, whatever our caller's working directory.
fn resolve_bind_source(mount: &mut Mount, index: usize, bundle: &Path, config: &Path) -> Result<()> {
    let Some(source) = mount.source().clone() else {
        return Err(Error::Config { path: config.to_path_buf(), reason: format!("mounts[{index}]: a bind mount needs a source") });
    };
    let real = fs::canonicalize(bundle.join(&source)).map_err(|e| Error::Config {
        path: config.to_path_buf(),
        reason: format!("mounts[{index}].source {} (for {}): {e}", source.display(), mount.destination().display()),
    })?;
    mount.set_source(Some(real));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bad_field_is_named_by_its_json_path() {
        let err = parse_spec_bytes(br#"{"ociVersion": "1.0.2", "hostname": 1}"#).unwrap_err();
        assert!(matches!(&err, SpecError::Field { field, .. } if field == "hostname"), "{err}");
        assert!(err.to_string().starts_with("invalid field hostname: invalid type: integer `1`"), "{err}");
        let err = parse_spec_bytes(b"1").unwrap_err();
        assert!(matches!(&err, SpecError::Whole(_)), "{err}");
        assert!(err.to_string().starts_with("invalid config: "), "{err}");
    }

    /// A bundle whose spec is `config` (rootfs /nonexistent-rootfs: nothing is read from it).
    fn bundle(config: serde_json::Value) -> Bundle {
        let mut base = json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "user": {"uid": 0, "gid": 0}, "env": ["PATH=/bin"]},
            "root": {"path": "rootfs"},
            "linux": {}
        });
        merge(&mut base, config);
        let spec = parse_spec_bytes(base.to_string().as_bytes()).expect("test spec parses");
        Bundle { path: PathBuf::from("/b"), spec, rootfs: PathBuf::from("/nonexistent-rootfs"), pids_init_only: false }
    }

    fn merge(base: &mut serde_json::Value, over: serde_json::Value) {
        if let (Some(b), serde_json::Value::Object(o)) = (base.as_object_mut(), over) {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
    }

    fn spec_of(config: serde_json::Value, systemd: bool) -> Result<Spec> {
        engine_spec("c1", &bundle(config), &EngineOptions { systemd_cgroup: systemd, cgroups: &[], own_rootfs: false })
    }

    fn cgroups_path(spec: &Spec) -> String {
        spec.linux().as_ref().unwrap().cgroups_path().as_ref().unwrap().display().to_string()
    }

    #[test]
    fn a_missing_cgroups_path_gets_runcs_default_per_driver() {
        assert_eq!(cgroups_path(&spec_of(json!({}), false).unwrap()), "/rustpod/c1");
        assert_eq!(cgroups_path(&spec_of(json!({}), true).unwrap()), "system.slice:rustpod:c1");
        let given = spec_of(json!({"linux": {"cgroupsPath": "/pods/x"}}), false).unwrap();
        assert_eq!(cgroups_path(&given), "/pods/x");
    }

    #[test]
    fn rootfs_propagation_takes_the_recursive_names() {
        let propagation = |v: &str| {
            spec_of(json!({"linux": {"rootfsPropagation": v}}), false).map(|s| s.linux().as_ref().unwrap().rootfs_propagation().clone())
        };
        assert_eq!(propagation("rslave").unwrap().as_deref(), Some("slave"));
        assert_eq!(propagation("rshared").unwrap().as_deref(), Some("shared"));
        assert_eq!(propagation("private").unwrap().as_deref(), Some("private"));
        let err = propagation("sideways").unwrap_err().to_string();
        assert!(err.contains("linux.rootfsPropagation"), "{err}");
    }

    #[test]
    fn per_mount_propagation_moves_to_our_first_create_container_hook() {
        let mount = json!({"destination": "/data", "type": "bind", "source": "/tmp", "options": ["rbind", "rslave", "ro"]});
        let spec = spec_of(json!({"mounts": [mount], "hooks": {"createContainer": [{"path": "/h"}]}}), false).unwrap();
        let data = spec.mounts().as_ref().unwrap().iter().find(|m| m.destination() == Path::new("/data")).unwrap();
        assert_eq!(data.options().as_deref(), Some(&["rbind".to_string(), "ro".to_string()][..]));
        let hooks = spec.hooks().as_ref().unwrap().create_container().clone().unwrap();
        assert_eq!(hooks.len(), 2);
        let args = hooks[0].args().clone().unwrap();
        assert_eq!(args[0], rootfs_hook::HOOK_ARG0);
        assert_eq!(&args[2..], &["/data".to_string(), "rslave".to_string()]);
        assert_eq!(hooks[1].args().clone().unwrap()[0], hook_state::WRAPPER_ARG0, "the user's hook is wrapped");
    }

    #[test]
    fn start_container_hooks_are_wrapped_and_end_at_the_barrier() {
        let spec = spec_of(json!({"hooks": {"startContainer": [{"path": "/hook.sh"}], "poststart": [{"path": "/p"}]}}), false).unwrap();
        assert!(has_start_container_hooks(&spec));
        let hooks = spec.hooks().as_ref().unwrap().start_container().clone().unwrap();
        let arg0s: Vec<String> = hooks.iter().map(|h| h.args().clone().unwrap()[0].clone()).collect();
        assert_eq!(arg0s, [hook_state::START_WRAPPER_ARG0, start_barrier::BARRIER_ARG0]);
        let mut spec = spec;
        assert_eq!(take_poststart(&mut spec).len(), 1);
        assert!(spec.hooks().as_ref().unwrap().poststart().is_none(), "start runs poststart itself");
    }

    #[test]
    fn our_init_runs_start_container_hooks_as_given() {
        let hook = json!({"path": "/hook.sh", "args": ["hook.sh", "x"]});
        let opts = EngineOptions { own_rootfs: true, ..Default::default() };
        let spec = engine_spec("c1", &bundle(json!({"hooks": {"startContainer": [hook]}})), &opts).unwrap();
        let hooks = spec.hooks().as_ref().unwrap().start_container().clone().unwrap();
        assert_eq!(hooks.len(), 1, "no barrier: {hooks:?}");
        assert_eq!(hooks[0].path(), Path::new("/hook.sh"));
        assert_eq!(hooks[0].args().as_deref(), Some(&["hook.sh".to_string(), "x".to_string()][..]));
    }

    #[test]
    fn mount_destinations_must_be_absolute_and_not_climb() {
        for dest in ["relative", "/a/../../etc"] {
            let mount = json!({"destination": dest, "type": "tmpfs", "source": "tmpfs"});
            let mut mounts: Vec<Mount> = vec![serde_json::from_value(mount).unwrap()];
            let err = check_mounts(mounts.iter_mut(), Path::new("/b"), Path::new("/b/config.json")).unwrap_err().to_string();
            assert!(err.contains("mounts[0].destination"), "{dest}: {err}");
        }
    }
}

//! The runtime-spec 1.2/1.3 fields oci-spec 0.10 or libcontainer 0.7 get
//! wrong. Mount fields rustpod cannot honour: `tmpcopyup` on a mount that is
//! not a tmpfs, and a superblock flag or filesystem data on a bind (runc
//! lets all three go); `tmpcopyup` on a remount (runc fails EINVAL); and
//! `remount` where the engine makes the rootfs, as it mounts anew instead.
//! Each is refused at create, naming the mount and field. (Idmapped mounts:
//! `idmap_mount` plans them and refuses what it cannot do.)

use std::path::PathBuf;

use oci_spec::runtime::{Mount, Spec};

use crate::engine::rootfs::plan;

/// The newest runtime-spec version whose every field is applied or refused
/// at create naming it (oci-spec 0.10 calls itself 1.1.0): `features`'
/// ociVersionMax and the starter spec's ociVersion.
pub const OCI_VERSION_MAX: &str = "1.3.0";

/// A mount option rustpod would otherwise drop, naming the mount (index,
/// destination) and the option.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("mounts[{index}] ({}): option {option:?}: {why}", destination.display())]
pub struct UnappliedOption {
    pub index: usize,
    pub destination: PathBuf,
    pub option: String,
    pub why: Unapplied,
}

/// Why rustpod cannot apply the option where it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Unapplied {
    /// runc copies up into a tmpfs only, and ignores it on other mounts.
    #[error("only a tmpfs mount can copy up the image's files")]
    CopyupNotTmpfs,
    /// runc passes them to a bind's remount, where the kernel ignores them.
    #[error("a superblock flag, which a bind mount cannot change (it is the source filesystem's)")]
    SuperblockFlagOnBind,
    /// runc passes it to a bind's mount(2), which ignores a bind's data.
    #[error("filesystem data, which a bind mount takes none of (it is the source filesystem's)")]
    DataOnBind,
    /// runc's copy-up mounts a tmpfs with MS_REMOUNT on its scratch
    /// directory, which fails EINVAL.
    #[error("a remount makes no new tmpfs to copy the image's files into")]
    CopyupOnRemount,
    /// libcontainer 0.7 reads `remount` and mounts a new filesystem on top.
    #[error("the engine makes this container's rootfs ({0}), and it would mount anew instead of remounting")]
    RemountByEngine(&'static str),
}

/// The first mount option of `spec` we would otherwise drop.
pub fn check_mounts(spec: &Spec) -> Result<(), UnappliedOption> {
    for (index, mount) in spec.mounts().iter().flatten().enumerate() {
        if let Some((option, why)) = unapplied(mount) {
            return Err(UnappliedOption { index, destination: mount.destination().clone(), option: option.clone(), why });
        }
    }
    Ok(())
}

/// The first `remount` of `spec`, where the engine makes the rootfs
/// because of `why`.
pub fn check_engine_mounts(spec: &Spec, why: &'static str) -> Result<(), UnappliedOption> {
    for (index, mount) in spec.mounts().iter().flatten().enumerate() {
        if let Some(option) = mount.options().iter().flatten().find(|o| *o == "remount") {
            return Err(UnappliedOption {
                index,
                destination: mount.destination().clone(),
                option: option.clone(),
                why: Unapplied::RemountByEngine(why),
            });
        }
    }
    Ok(())
}

fn unapplied(mount: &Mount) -> Option<(&String, Unapplied)> {
    let options = mount.options().as_deref().unwrap_or_default();
    let remount = options.iter().any(|o| o == "remount");
    options.iter().find_map(|option| {
        let copyup = crate::engine::mount::copyup::is_copyup(option);
        if copyup && mount.typ().as_deref() != Some("tmpfs") {
            Some((option, Unapplied::CopyupNotTmpfs))
        } else if copyup && remount {
            Some((option, Unapplied::CopyupOnRemount))
        } else if !crate::engine::engine_bundle::is_bind(mount) {
            None
        } else if plan::is_superblock_flag(option) {
            Some((option, Unapplied::SuperblockFlagOnBind))
        } else if plan::is_filesystem_data(option) {
            Some((option, Unapplied::DataOnBind))
        } else {
            None
        }
    })
}

/// `linux.resources.pids.limit` is given as 0 or 1: the init alone.
/// runtime-spec 1.3 (and runc ≥ 1.4) make 0 a real limit (no new task),
/// -1 "max" and an absent limit "leave it"; oci-spec 0.10 reads an absent
/// limit as 0 and libcgroups writes "max" for both, so the raw JSON tells
/// them apart.
pub fn pids_limit_is_init_only(raw: &serde_json::Value) -> bool {
    matches!(raw.pointer("/linux/resources/pids/limit").and_then(serde_json::Value::as_i64), Some(0 | 1))
}

/// The runtime-spec's scheduler flags that oci-spec 0.10 spells otherwise
/// (it would refuse them), and its spelling.
const SCHEDULER_FLAG_NAMES: [(&str, &str); 2] =
    [("SCHED_FLAG_RESET_ON_FORK", "SCHED_RESET_ON_FORK"), ("SCHED_FLAG_DL_OVERRUN", "SCHED_FLAG_D_L_OVERRUN")];

/// Renames, in the config's JSON, the runtime-spec names oci-spec 0.10
/// spells otherwise (`SCHEDULER_FLAG_NAMES`). Returns whether anything was
/// renamed.
pub fn to_oci_spec_names(raw: &mut serde_json::Value) -> bool {
    let Some(flags) = raw.pointer_mut("/process/scheduler/flags").and_then(|f| f.as_array_mut()) else {
        return false;
    };
    let mut renamed = false;
    for flag in flags.iter_mut() {
        if let Some((_, theirs)) = SCHEDULER_FLAG_NAMES.iter().find(|(spec, _)| *flag == *spec) {
            *flag = (*theirs).into();
            renamed = true;
        }
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(mounts: serde_json::Value) -> Spec {
        serde_json::from_value(json!({"ociVersion": "1.3.0", "mounts": mounts})).unwrap()
    }

    #[test]
    fn a_remount_is_refused_where_the_engine_makes_the_rootfs() {
        let mounts = json!([{"destination": "/t", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m"]},
            {"destination": "/t", "type": "tmpfs", "source": "tmpfs", "options": ["ro", "remount"]}]);
        let err = check_engine_mounts(&spec(mounts.clone()), "a mount label").unwrap_err().to_string();
        assert_eq!(
            err,
            "mounts[1] (/t): option \"remount\": the engine makes this container's rootfs (a mount label), and it would mount anew instead of remounting"
        );
        assert_eq!(check_mounts(&spec(mounts)), Ok(()), "our rootfs steps remount");
    }

    #[test]
    fn unapplied_mounts_are_refused_naming_the_mount() {
        let cases = [
            (
                json!({"destination": "/a", "type": "bind", "source": "/tmp", "options": ["bind", "tmpcopyup"]}),
                "\"tmpcopyup\"",
                Unapplied::CopyupNotTmpfs,
            ),
            (
                json!({"destination": "/a", "type": "bind", "source": "/tmp", "options": ["bind", "lazytime"]}),
                "\"lazytime\"",
                Unapplied::SuperblockFlagOnBind,
            ),
            (
                json!({"destination": "/a", "type": "none", "source": "/tmp", "options": ["rbind", "ro", "sync"]}),
                "\"sync\"",
                Unapplied::SuperblockFlagOnBind,
            ),
            (
                json!({"destination": "/a", "type": "bind", "source": "/tmp", "options": ["rbind", "rprivate", "mode=755"]}),
                "\"mode=755\"",
                Unapplied::DataOnBind,
            ),
            (
                json!({"destination": "/a", "type": "tmpfs", "source": "tmpfs", "options": ["remount", "tmpcopyup"]}),
                "\"tmpcopyup\"",
                Unapplied::CopyupOnRemount,
            ),
        ];
        for (mount, field, why) in cases {
            let ok = json!({"destination": "/ok", "type": "tmpfs", "source": "tmpfs", "options": ["nosymfollow"]});
            let err = check_mounts(&spec(json!([ok, mount]))).unwrap_err();
            assert_eq!(err.why, why);
            let err = err.to_string();
            assert!(err.starts_with(&format!("mounts[1] (/a): option {field}: ")), "{err}");
        }
        // What clients put on their binds passes.
        let binds = json!([{"destination": "/a", "type": "bind", "source": "/tmp",
            "options": ["rbind", "rprivate", "ro", "nosuid", "nodev", "noexec", "rro", "nosymfollow", "idmap"]}]);
        assert_eq!(check_mounts(&spec(binds)), Ok(()));
        // A fresh filesystem takes its own data.
        let tmpfs = json!([{"destination": "/t", "type": "tmpfs", "source": "tmpfs", "options": ["size=1m", "mode=755", "sync"]}]);
        assert_eq!(check_mounts(&spec(tmpfs)), Ok(()));
    }

    #[test]
    fn the_specs_scheduler_flag_names_parse() {
        let mut raw = json!({"ociVersion": "1.3.0", "process": {"cwd": "/", "user": {"uid": 0, "gid": 0},
            "scheduler": {"policy": "SCHED_DEADLINE", "flags": ["SCHED_FLAG_RESET_ON_FORK", "SCHED_FLAG_RECLAIM", "SCHED_FLAG_DL_OVERRUN"]}}});
        assert!(to_oci_spec_names(&mut raw));
        let spec: Spec = serde_json::from_value(raw).unwrap();
        let flags = spec.process().as_ref().unwrap().scheduler().as_ref().unwrap().flags().clone().unwrap();
        use oci_spec::runtime::LinuxSchedulerFlag::*;
        assert_eq!(flags, [SchedResetOnFork, SchedFlagReclaim, SchedFlagDLOverrun]);
    }

    #[test]
    fn only_an_explicit_zero_is_a_zero_pids_limit() {
        assert!(pids_limit_is_init_only(&json!({"linux": {"resources": {"pids": {"limit": 0}}}})));
        assert!(pids_limit_is_init_only(&json!({"linux": {"resources": {"pids": {"limit": 1}}}})));
        assert!(!pids_limit_is_init_only(&json!({"linux": {"resources": {"pids": {}}}})));
        assert!(!pids_limit_is_init_only(&json!({"linux": {"resources": {"pids": {"limit": -1}}}})));
        assert!(!pids_limit_is_init_only(&json!({"linux": {"resources": {"pids": {"limit": 2}}}})));
    }

    /// oci-spec 0.10 keeps every runtime-spec 1.3 field of a full config
    /// (serde drops an unknown one silently): only the deprecated
    /// intelRdt.enableCMT/enableMBM are lost, and intelRdt is refused whole.
    #[test]
    fn oci_spec_keeps_every_1_3_field() {
        let raw: serde_json::Value = serde_json::from_str(include_str!("../../testdata/config-1.3-full.json")).unwrap();
        let spec: Spec = serde_json::from_value(raw.clone()).unwrap();
        let back = serde_json::to_value(&spec).unwrap();
        let mut dropped = Vec::new();
        dropped_keys("", &raw, &back, &mut dropped);
        assert_eq!(dropped, [".linux.intelRdt.enableCMT", ".linux.intelRdt.enableMBM"]);
    }

    fn dropped_keys(path: &str, raw: &serde_json::Value, back: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value::{Array, Object};
        match (raw, back) {
            (Object(a), Object(b)) => {
                for (key, value) in a {
                    match b.get(key) {
                        None => out.push(format!("{path}.{key}")),
                        Some(kept) => dropped_keys(&format!("{path}.{key}"), value, kept, out),
                    }
                }
            }
            (Array(a), Array(b)) => {
                for (index, (value, kept)) in a.iter().zip(b).enumerate() {
                    dropped_keys(&format!("{path}[{index}]"), value, kept, out);
                }
            }
            _ => {}
        }
    }
}

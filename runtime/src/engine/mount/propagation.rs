//! Per-mount propagation (`rshared`, `rslave`, `private`, …): the engine
//! drops these options, so our createContainer step (`rootfs_hook`) applies
//! them in the container's mount namespace before pivot_root, with
//! mount_setattr(2) on the destination's descriptor. Its syscalls go through
//! the `Syscall` seam.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use nix::mount::MsFlags;

use crate::engine::mount::step_error::StepError;
use crate::sys::mount_api::MountAttr;
use crate::sys::syscall::Syscall;

/// The propagation options of one mount, in the order they were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPropagation {
    pub destination: PathBuf,
    pub flags: Vec<String>,
}

/// The mount(2) flags for a propagation option, or None if it is not one.
pub fn propagation_flags(option: &str) -> Option<MsFlags> {
    let flags = match option {
        "private" => MsFlags::MS_PRIVATE,
        "rprivate" => MsFlags::MS_PRIVATE | MsFlags::MS_REC,
        "slave" => MsFlags::MS_SLAVE,
        "rslave" => MsFlags::MS_SLAVE | MsFlags::MS_REC,
        "shared" => MsFlags::MS_SHARED,
        "rshared" => MsFlags::MS_SHARED | MsFlags::MS_REC,
        "unbindable" => MsFlags::MS_UNBINDABLE,
        "runbindable" => MsFlags::MS_UNBINDABLE | MsFlags::MS_REC,
        _ => return None,
    };
    Some(flags)
}

/// mount_setattr(2)'s form of [`propagation_flags`]: the propagation type,
/// and `AT_RECURSIVE` for the `r` forms.
pub(crate) fn setattr_of(flags: MsFlags) -> (MountAttr, libc::c_int) {
    let recursive = if flags.contains(MsFlags::MS_REC) { libc::AT_RECURSIVE } else { 0 };
    let propagation = flags.difference(MsFlags::MS_REC).bits();
    (MountAttr::propagation(propagation), recursive)
}

/// Splits mount options into (the rest, the propagation options).
pub fn split_options(options: &[String]) -> (Vec<String>, Vec<String>) {
    options.iter().cloned().partition(|o| propagation_flags(o).is_none())
}

/// Applies one mount's propagation options, one mount_setattr(2) each in
/// the order given, on the destination resolved inside the rootfs so a
/// symlink can never point it at the host.
pub fn apply(sys: &dyn Syscall, root: &OwnedFd, entry: &MountPropagation) -> Result<(), StepError> {
    let dest = &entry.destination;
    let target = sys.open_in_root(root, dest, libc::O_PATH).map_err(|e| StepError::open(dest, &e))?;
    for option in &entry.flags {
        let flags = propagation_flags(option).ok_or_else(|| StepError::NotOurs {
            dest: dest.clone(),
            option: option.clone(),
            kind: "propagation option",
        })?;
        let (attr, recursive) = setattr_of(flags);
        sys.mount_setattr(&target, attr, recursive).map_err(|errno| StepError::call("mount_setattr", dest, option, errno))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::syscall::{Call, Recording};

    #[test]
    fn splits_propagation_from_other_options() {
        let opts: Vec<String> = ["rbind", "rslave", "ro", "shared"].map(String::from).to_vec();
        let (rest, prop) = split_options(&opts);
        assert_eq!(rest, vec!["rbind", "ro"]);
        assert_eq!(prop, vec!["rslave", "shared"]);
    }

    #[test]
    fn every_spec_propagation_option_is_known() {
        for o in ["private", "rprivate", "slave", "rslave", "shared", "rshared", "unbindable", "runbindable"] {
            assert!(propagation_flags(o).is_some(), "{o}");
        }
        assert!(propagation_flags("rbind").is_none());
    }

    fn entry(dest: &str, flags: &[&str]) -> MountPropagation {
        MountPropagation { destination: PathBuf::from(dest), flags: flags.iter().map(|f| f.to_string()).collect() }
    }

    fn root() -> OwnedFd {
        std::fs::File::open("/").unwrap().into()
    }

    #[test]
    fn sets_each_option_in_order_on_the_destination_opened_in_the_root() {
        let sys = Recording::default();
        apply(&sys, &root(), &entry("/mnt/a", &["rslave", "shared"])).unwrap();
        let mnt = PathBuf::from("/mnt/a");
        assert_eq!(
            sys.calls(),
            vec![
                Call::Open { path: mnt.clone(), flags: libc::O_PATH },
                Call::SetAttr { path: mnt.clone(), attr: MountAttr::propagation(libc::MS_SLAVE), flags: libc::AT_RECURSIVE },
                Call::SetAttr { path: mnt, attr: MountAttr::propagation(libc::MS_SHARED), flags: 0 },
            ]
        );
    }

    #[test]
    fn each_option_is_one_propagation_type_recursive_for_the_r_forms() {
        let table = [
            ("private", libc::MS_PRIVATE, 0),
            ("rprivate", libc::MS_PRIVATE, libc::AT_RECURSIVE),
            ("slave", libc::MS_SLAVE, 0),
            ("rslave", libc::MS_SLAVE, libc::AT_RECURSIVE),
            ("shared", libc::MS_SHARED, 0),
            ("rshared", libc::MS_SHARED, libc::AT_RECURSIVE),
            ("unbindable", libc::MS_UNBINDABLE, 0),
            ("runbindable", libc::MS_UNBINDABLE, libc::AT_RECURSIVE),
        ];
        for (option, ms, recursive) in table {
            let flags = propagation_flags(option).unwrap();
            assert_eq!(setattr_of(flags), (MountAttr::propagation(ms), recursive), "{option}");
        }
    }

    #[test]
    fn a_refused_call_names_the_destination_the_option_the_syscall_and_the_errno() {
        let sys = Recording::failing_setattr(nix::errno::Errno::EINVAL);
        let err = apply(&sys, &root(), &entry("/mnt/a", &["rslave", "shared"])).unwrap_err();
        assert_eq!(err.to_string(), "mount_setattr /mnt/a (rslave): EINVAL: Invalid argument");
        // Stopped at the first refusal.
        assert_eq!(sys.calls().len(), 2);
    }

    #[test]
    fn refuses_an_option_that_is_not_propagation_naming_it() {
        let sys = Recording::default();
        let err = apply(&sys, &root(), &entry("/mnt/a", &["rprivate", "rbind"])).unwrap_err();
        assert_eq!(err.to_string(), r#"/mnt/a: "rbind" is not a propagation option"#);
        // The options before it were set; nothing after.
        assert_eq!(sys.calls().len(), 2);
    }

    #[test]
    fn a_destination_that_cannot_be_opened_is_the_error_and_nothing_is_mounted() {
        let sys = Recording::failing_open(nix::errno::Errno::ELOOP);
        let err = apply(&sys, &root(), &entry("/mnt/link", &["rshared"])).unwrap_err();
        assert_eq!(err, StepError::Open { dest: PathBuf::from("/mnt/link"), errno: nix::errno::Errno::ELOOP });
        assert_eq!(sys.calls(), vec![Call::Open { path: PathBuf::from("/mnt/link"), flags: libc::O_PATH }]);
    }
}

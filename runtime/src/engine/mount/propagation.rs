//! Per-mount propagation (`rshared`, `rslave`, `private`, …): the engine
//! drops these options, so our createContainer step (`rootfs_hook`) applies
//! them in the container's mount namespace before pivot_root.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use nix::mount::{mount, MsFlags};

use crate::sys::in_root;

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

/// Splits mount options into (the rest, the propagation options).
pub fn split_options(options: &[String]) -> (Vec<String>, Vec<String>) {
    options
        .iter()
        .cloned()
        .partition(|o| propagation_flags(o).is_none())
}

/// Applies one mount's propagation options, resolving the destination
/// inside the rootfs so a symlink can never point it at the host.
pub fn apply(root: &OwnedFd, entry: &MountPropagation) -> Result<(), String> {
    let dest = &entry.destination;
    let target = in_root::open(Some(root), dest, libc::O_PATH).map_err(|e| format!("open {}: {e}", dest.display()))?;
    let proc_path = format!("/proc/self/fd/{}", target.as_raw_fd());
    for option in &entry.flags {
        let flags = propagation_flags(option)
            .ok_or_else(|| format!("{}: {option:?} is not a propagation option", dest.display()))?;
        mount(None::<&str>, proc_path.as_str(), None::<&str>, flags, None::<&str>)
            .map_err(|e| format!("set {option} on {}: {e}", dest.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

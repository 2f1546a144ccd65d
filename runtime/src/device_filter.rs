//! cgroup v2 device rules under the systemd driver. libcgroups attaches its
//! eBPF device program only through its cgroupfs manager; its systemd
//! manager sets neither DevicePolicy nor a program, so without this step a
//! container could open any device node it can make.

use oci_spec::runtime::Spec;

use crate::error::{Error, Result};

/// Attaches the device program for `spec`'s rules (libcgroups' emulator:
/// deny all, then the rules, then runc's default allow-list) to the
/// cgroup of `init_pid`, on a cgroup v2 host. A kernel or a caller that
/// cannot load it fails the create: the container never runs unconfined.
pub fn attach_for_systemd(spec: &Spec, init_pid: i32) -> Result<()> {
    let unified = matches!(libcgroups::common::get_cgroup_setup(), Ok(libcgroups::common::CgroupSetup::Unified));
    if !unified {
        return Ok(());
    }
    let dir = crate::stats::v2_dir_of(init_pid)?;
    let devices = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().clone());
    libcgroups::v2::devices::controller::Devices::apply_devices(&dir, &devices).map_err(|e| Error::Cgroup {
        path: dir,
        reason: format!("attach the eBPF device program (bpf(2) BPF_PROG_LOAD/BPF_PROG_ATTACH): {e}"),
    })
}

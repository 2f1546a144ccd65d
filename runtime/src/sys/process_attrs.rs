//! Attributes a process sets on itself before it execs a container's
//! program, where libc or nix has no wrapper: its scheduling policy
//! (sched_setattr(2)) and its capability bounding set, dropped one
//! capability at a time without reading it first.

use nix::errno::Errno;

/// `struct sched_attr` of the kernel's uapi (its size as of Linux 5.3).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SchedAttr {
    pub size: u32,
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    pub priority: u32,
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
    pub util_min: u32,
    pub util_max: u32,
}

impl SchedAttr {
    pub const SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;
}

/// sched_setattr(2) on the calling thread.
pub fn sched_setattr(attr: &SchedAttr) -> Result<(), Errno> {
    // SAFETY: `attr` is a live struct of the size it declares.
    let ret = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, attr as *const SchedAttr, 0) };
    Errno::result(ret).map(drop)
}

/// prctl(PR_CAPBSET_DROP) of capability number `cap`.
pub fn bounding_drop(cap: u8) -> Result<(), Errno> {
    // SAFETY: a prctl with integer arguments only.
    let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
    Errno::result(ret).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_struct_has_the_kernels_size() {
        // SCHED_ATTR_SIZE_VER1 in include/uapi/linux/sched/types.h.
        assert_eq!(SchedAttr::SIZE, 56);
    }
}

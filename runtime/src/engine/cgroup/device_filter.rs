//! Device rules on cgroup v2: an eBPF program (BPF_PROG_TYPE_CGROUP_DEVICE)
//! built from `linux.resources.devices` and attached to the container's cgroup.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use libcgroups::common::CgroupSetup;
use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType, Spec};

use crate::engine::cgroup::device_rules;
use crate::error::{Error, Result};

/// Access bits as the kernel passes them (`BPF_DEVCG_ACC_*`).
const MKNOD: u8 = 1;
const READ: u8 = 2;
const WRITE: u8 = 4;
const ALL: u8 = MKNOD | READ | WRITE;

/// Device types as the kernel passes them (`BPF_DEVCG_DEV_*`).
const BLOCK: i32 = 1;
const CHAR: i32 = 2;

/// One rule the program checks: `kind` None is any type, a None number any number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exception {
    pub kind: Option<i32>,
    pub major: Option<i64>,
    pub minor: Option<i64>,
    pub access: u8,
}

impl Exception {
    fn same_device(&self, other: &Exception) -> bool {
        (self.kind, self.major, self.minor) == (other.kind, other.major, other.minor)
    }
}

/// The rules reduced to what cgroup v1's devices controller would hold
/// after they were written in order: a default and its exceptions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub default_allow: bool,
    pub exceptions: Vec<Exception>,
}

impl Filter {
    /// Applies the rules in order, as the v1 kernel (and runc's emulator)
    /// does: a type `a` rule resets everything; a rule that agrees with the
    /// default takes its access away from the same device's exception.
    pub fn from_rules(rules: &[LinuxDeviceCgroup]) -> Result<Filter> {
        let mut filter = Filter::default();
        for rule in rules {
            filter.apply(rule)?;
        }
        Ok(filter)
    }

    /// Whether reading and writing the char device `major:minor` is allowed.
    pub fn allows_char(&self, major: i64, minor: i64) -> bool {
        let access = READ | WRITE;
        let matches = |ex: &&Exception| {
            ex.kind.is_none_or(|k| k == CHAR) && ex.major.is_none_or(|m| m == major) && ex.minor.is_none_or(|m| m == minor)
        };
        if self.default_allow {
            !self.exceptions.iter().filter(matches).any(|ex| ex.access & access != 0)
        } else {
            self.exceptions.iter().filter(matches).any(|ex| ex.access & access == access)
        }
    }

    fn apply(&mut self, rule: &LinuxDeviceCgroup) -> Result<()> {
        let kind = match rule.typ().unwrap_or(LinuxDeviceType::A) {
            LinuxDeviceType::A => {
                *self = Filter { default_allow: rule.allow(), exceptions: Vec::new() };
                return Ok(());
            }
            LinuxDeviceType::B => Some(BLOCK),
            LinuxDeviceType::C | LinuxDeviceType::U => Some(CHAR),
            LinuxDeviceType::P => return Ok(()), // no device cgroup rule for FIFOs, as runc
        };
        let access = parse_access(rule.access().as_deref().unwrap_or("rwm"))?;
        let wildcard = |n: Option<i64>| n.filter(|n| *n >= 0);
        let new = Exception { kind, major: wildcard(rule.major()), minor: wildcard(rule.minor()), access };
        if rule.allow() == self.default_allow {
            for ex in self.exceptions.iter_mut().filter(|ex| ex.same_device(&new)) {
                ex.access &= !access;
            }
            self.exceptions.retain(|ex| ex.access != 0);
        } else if let Some(ex) = self.exceptions.iter_mut().find(|ex| ex.same_device(&new)) {
            ex.access |= access;
        } else {
            self.exceptions.push(new);
        }
        Ok(())
    }
}

fn parse_access(access: &str) -> Result<u8> {
    access.chars().try_fold(0, |bits, c| match c {
        'r' => Ok(bits | READ),
        'w' => Ok(bits | WRITE),
        'm' => Ok(bits | MKNOD),
        _ => Err(Error::Invalid(format!("linux.resources.devices: invalid access {access:?} (want a combination of r, w, m)"))),
    })
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: dst | (src << 4), off, imm }
}

// Opcodes: class | op | source.
const LDX_MEM_W: u8 = 0x61;
const ALU32_AND_K: u8 = 0x54;
const ALU32_RSH_K: u8 = 0x74;
const ALU32_MOV_K: u8 = 0xb4;
const ALU32_MOV_X: u8 = 0xbc;
const JMP_JNE_K: u8 = 0x55;
const JMP_JNE_X: u8 = 0x5d;
const JMP_JEQ_K: u8 = 0x15;
const JMP_EXIT: u8 = 0x95;

/// The program: for each exception, if the device matches return the
/// opposite of the default; else return the default. An allow exception
/// must cover all the access asked for; a deny exception needs only to
/// share one bit with it (as v1's partial match).
pub fn program(filter: &Filter) -> Vec<Insn> {
    // R2 = type, R3 = access, R4 = major, R5 = minor (struct bpf_cgroup_dev_ctx).
    let mut prog = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU32_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 3, 1, 0, 0),
        insn(ALU32_RSH_K, 3, 0, 0, 16),
        insn(LDX_MEM_W, 4, 1, 4, 0),
        insn(LDX_MEM_W, 5, 1, 8, 0),
    ];
    for ex in &filter.exceptions {
        prog.extend(exception_block(ex, !filter.default_allow));
    }
    prog.push(insn(ALU32_MOV_K, 0, 0, 0, filter.default_allow as i32));
    prog.push(insn(JMP_EXIT, 0, 0, 0, 0));
    prog
}

/// A block that returns `allow` when the device matches `ex`, and falls
/// through to the next block otherwise.
fn exception_block(ex: &Exception, allow: bool) -> Vec<Insn> {
    // Tests jump to the "next" label, patched once the block's length is known.
    let mut tests: Vec<Insn> = Vec::new();
    if let Some(kind) = ex.kind {
        tests.push(insn(JMP_JNE_K, 2, 0, 0, kind));
    }
    if ex.access != ALL {
        tests.push(insn(ALU32_MOV_X, 1, 3, 0, 0));
        tests.push(insn(ALU32_AND_K, 1, 0, 0, ex.access as i32));
        // allow: R3 & access == R3; deny: R3 & access != 0.
        tests.push(if allow { insn(JMP_JNE_X, 1, 3, 0, 0) } else { insn(JMP_JEQ_K, 1, 0, 0, 0) });
    }
    for (reg, number) in [(4, ex.major), (5, ex.minor)] {
        if let Some(n) = number {
            tests.push(insn(JMP_JNE_K, reg, 0, 0, n as i32));
        }
    }
    tests.push(insn(ALU32_MOV_K, 0, 0, 0, allow as i32));
    tests.push(insn(JMP_EXIT, 0, 0, 0, 0));
    let len = tests.len();
    for (i, t) in tests.iter_mut().enumerate() {
        if t.code == JMP_JNE_K || t.code == JMP_JNE_X || t.code == JMP_JEQ_K {
            t.off = (len - i - 1) as i16;
        }
    }
    tests
}

const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_ATTACH: libc::c_int = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;

/// The `union bpf_attr` fields BPF_PROG_LOAD reads, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The `union bpf_attr` fields BPF_PROG_ATTACH reads.
#[repr(C)]
#[derive(Default)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> std::result::Result<libc::c_long, Errno> {
    // SAFETY: attr is a live, initialized bpf_attr prefix of the given size.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    Errno::result(ret)
}

fn bpf_error(op: &'static str, cgroup: &Path, err: Errno) -> Error {
    Error::Bpf { op, path: cgroup.to_path_buf(), err }
}

/// Loads the program; the returned fd keeps it alive until attached.
pub fn load(prog: &[Insn], cgroup: &Path) -> Result<OwnedFd> {
    let license = c"Apache";
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..Default::default()
    };
    attr.prog_name[..7].copy_from_slice(b"rustpod");
    let fd = bpf(BPF_PROG_LOAD, &mut attr).map_err(|e| bpf_error("bpf(2) BPF_PROG_LOAD device program for", cgroup, e))?;
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Attaches the program to the cgroup; with ALLOW_MULTI, programs of
/// parent cgroups keep applying too.
pub fn attach(prog: &OwnedFd, cgroup_dir: &OwnedFd, cgroup: &Path) -> Result<()> {
    let mut attr = ProgAttachAttr {
        target_fd: cgroup_dir.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        ..Default::default()
    };
    bpf(BPF_PROG_ATTACH, &mut attr).map_err(|e| bpf_error("bpf(2) BPF_PROG_ATTACH device program to", cgroup, e))?;
    Ok(())
}

/// The v2 cgroup directory a process is in, from its `0::` line.
pub fn cgroup_dir_of(pid: i32) -> Result<PathBuf> {
    let file = PathBuf::from(format!("/proc/{pid}/cgroup"));
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| Error::Invalid(format!("{}: no cgroup v2 entry", file.display())))?;
    Ok(Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/')))
}

/// On a pure cgroup v2 host, confines the devices of the cgroup that `pid`
/// (the container's init) is in. Elsewhere v1's devices controller does it.
pub fn apply(spec: &Spec, pid: i32) -> Result<()> {
    if !matches!(libcgroups::common::get_cgroup_setup(), Ok(CgroupSetup::Unified)) {
        return Ok(());
    }
    let resources = spec.linux().as_ref().and_then(|l| l.resources().as_ref());
    let filter = Filter::from_rules(&device_rules::container_rules(resources))?;
    let cgroup = cgroup_dir_of(pid)?;
    let dir = open(&cgroup, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| bpf_error("open cgroup directory", &cgroup, e))?;
    // SAFETY: open just returned this fd.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    let prog = load(&program(&filter), &cgroup)?;
    attach(&prog, &dir, &cgroup)
}

#[cfg(test)]
mod tests {
    use oci_spec::runtime::LinuxDeviceCgroupBuilder;

    use super::*;

    fn rule(allow: bool, typ: LinuxDeviceType, major: Option<i64>, minor: Option<i64>, access: &str) -> LinuxDeviceCgroup {
        let mut b = LinuxDeviceCgroupBuilder::default().allow(allow).typ(typ).access(access);
        if let Some(m) = major {
            b = b.major(m);
        }
        if let Some(m) = minor {
            b = b.minor(m);
        }
        b.build().unwrap()
    }

    #[test]
    fn deny_all_then_allow_keeps_only_the_exceptions() {
        let rules = [rule(false, LinuxDeviceType::A, None, None, "rwm"), rule(true, LinuxDeviceType::C, Some(1), Some(3), "rw")];
        let f = Filter::from_rules(&rules).unwrap();
        assert!(!f.default_allow);
        assert_eq!(f.exceptions, vec![Exception { kind: Some(CHAR), major: Some(1), minor: Some(3), access: READ | WRITE }]);
    }

    #[test]
    fn a_later_deny_takes_access_away() {
        let rules = [
            rule(true, LinuxDeviceType::C, Some(1), Some(11), "rwm"),
            rule(false, LinuxDeviceType::C, Some(1), Some(11), "w"),
            rule(false, LinuxDeviceType::C, Some(1), Some(11), "rm"),
        ];
        assert!(Filter::from_rules(&rules).unwrap().exceptions.is_empty());
    }

    #[test]
    fn allow_all_resets_to_a_deny_list() {
        let rules = [
            rule(true, LinuxDeviceType::C, Some(1), Some(3), "rwm"),
            rule(true, LinuxDeviceType::A, None, None, "rwm"),
            rule(false, LinuxDeviceType::B, Some(8), None, "w"),
        ];
        let f = Filter::from_rules(&rules).unwrap();
        assert!(f.default_allow);
        assert_eq!(f.exceptions, vec![Exception { kind: Some(BLOCK), major: Some(8), minor: None, access: WRITE }]);
    }

    #[test]
    fn bad_access_is_refused_by_name() {
        let err = Filter::from_rules(&[rule(true, LinuxDeviceType::C, Some(1), Some(3), "rx")]).unwrap_err();
        assert!(err.to_string().contains("linux.resources.devices"), "{err}");
    }

    #[test]
    fn jumps_land_on_the_next_block() {
        let f =
            Filter { default_allow: false, exceptions: vec![Exception { kind: Some(CHAR), major: Some(1), minor: Some(3), access: READ }] };
        let p = program(&f);
        // 6 loads, then: type, mov, and, access, major, minor, mov r0, exit; then the default.
        assert_eq!(p.len(), 6 + 8 + 2);
        for (i, ins) in p.iter().enumerate().filter(|(_, i)| [JMP_JNE_K, JMP_JNE_X].contains(&i.code)) {
            assert_eq!(i + 1 + ins.off as usize, 14, "jump at {i}");
        }
        assert_eq!(p[14], insn(ALU32_MOV_K, 0, 0, 0, 0));
    }
}

//! The seccomp architectures this build can load a filter for: `validate`
//! refuses a config naming another, and `features` lists them.

/// Of runc 1.5's 18 architectures, those a filter here can hold: libseccomp
/// puts the native one (x86_64) in every filter, and one filter's
/// architectures share its byte order, so the big-endian ones (MIPS,
/// MIPS64, MIPS64N32, PPC, PPC64, S390, S390X) cannot load on a
/// little-endian host; LOONGARCH64 needs libseccomp 2.6 (Debian 12 has 2.5.4).
pub const SECCOMP_ARCHS: &[&str] = &[
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_ARM",
    "SCMP_ARCH_MIPSEL",
    "SCMP_ARCH_MIPSEL64",
    "SCMP_ARCH_MIPSEL64N32",
    "SCMP_ARCH_PPC64LE",
    "SCMP_ARCH_RISCV64",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_X86",
    "SCMP_ARCH_X86_64",
];

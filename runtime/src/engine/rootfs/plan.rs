//! What each of a spec's mounts asks for, read from its options without a
//! syscall: a bind or a new filesystem, its per-mount, superblock and
//! recursive flags, propagation, `tmpcopyup`, idmap and the filesystem's own
//! parameters. Options apply in order, a later one undoing an earlier one, as
//! runc reads them. The rootfs steps of our own will mount from this plan;
//! the engine's own reading (`libcontainer::rootfs::utils::parse_mount`)
//! loses several of these options, which the tests below pin.

use std::path::PathBuf;

use nix::mount::MsFlags;
use oci_spec::runtime::Mount;

use crate::engine::engine_bundle::is_bind;
use crate::engine::idmap::plan::is_idmapped;
use crate::sys::mount_api::MountAttr;

/// One spec mount as the rootfs steps will make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMount {
    /// Its index in the spec's `mounts`, for error messages.
    pub index: usize,
    pub destination: PathBuf,
    pub source: Option<PathBuf>,
    pub kind: Kind,
    /// ro, nosuid, nodev, noexec, the atime modes, nosymfollow: this mount's.
    pub flags: Flags,
    /// sync, dirsync, mand, lazytime, iversion, silent: the filesystem's.
    pub superblock: Flags,
    /// rro, rnosuid, …: this mount and every mount below it.
    pub recursive: Flags,
    /// Propagation changes in the order given (`MS_REC` for the `r` forms).
    pub propagation: Vec<MsFlags>,
    /// The filesystem's own parameters (`mode=755`, `size=65536k`, …).
    pub data: Vec<String>,
    /// `remount`: change the flags of what is already mounted there.
    pub remount: bool,
    /// `tmpcopyup`: the new tmpfs starts with the image's files.
    pub copyup: bool,
    pub idmap: Option<Idmap>,
}

/// A bind of an existing tree, or a filesystem made anew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Bind { recursive: bool },
    New { fstype: String },
}

/// An idmapped bind; `recursive` (`ridmap`) maps the submounts too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idmap {
    pub recursive: bool,
}

/// A flag word built from options in order: which flags end up set, and
/// which ones an option named at all (so an unnamed flag is left as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags {
    pub set: MsFlags,
    pub named: MsFlags,
}

impl Default for Flags {
    fn default() -> Self {
        Flags { set: MsFlags::empty(), named: MsFlags::empty() }
    }
}

/// MS_NOSYMFOLLOW (Linux 5.10), which nix's `MsFlags` does not name.
pub const MS_NOSYMFOLLOW: MsFlags = MsFlags::from_bits_retain(libc::MS_NOSYMFOLLOW);

const ATIME_MODES: MsFlags = MsFlags::MS_NOATIME.union(MsFlags::MS_RELATIME).union(MsFlags::MS_STRICTATIME);

impl Flags {
    fn apply(&mut self, flag: MsFlags, set: bool) {
        self.set.set(flag, set);
        self.named |= flag;
    }

    /// mount_setattr(2)'s form: the named flags set or cleared. The atime
    /// mode is one value, not bits: when any mode option was named, the
    /// whole field is cleared and the mode mount(2) would pick is set
    /// (strictatime over noatime over the default relatime).
    pub fn to_attr(self) -> MountAttr {
        const BITS: &[(MsFlags, u64)] = &[
            (MsFlags::MS_RDONLY, libc::MOUNT_ATTR_RDONLY),
            (MsFlags::MS_NOSUID, libc::MOUNT_ATTR_NOSUID),
            (MsFlags::MS_NODEV, libc::MOUNT_ATTR_NODEV),
            (MsFlags::MS_NOEXEC, libc::MOUNT_ATTR_NOEXEC),
            (MsFlags::MS_NODIRATIME, libc::MOUNT_ATTR_NODIRATIME),
            (MS_NOSYMFOLLOW, libc::MOUNT_ATTR_NOSYMFOLLOW),
        ];
        let mut attr = MountAttr::default();
        for (flag, bit) in BITS {
            if self.set.contains(*flag) {
                attr.set |= bit;
            } else if self.named.contains(*flag) {
                attr.clear |= bit;
            }
        }
        if self.named.intersects(ATIME_MODES) {
            attr.clear |= libc::MOUNT_ATTR__ATIME;
            attr.set |= if self.set.contains(MsFlags::MS_STRICTATIME) {
                libc::MOUNT_ATTR_STRICTATIME
            } else if self.set.contains(MsFlags::MS_NOATIME) {
                libc::MOUNT_ATTR_NOATIME
            } else {
                libc::MOUNT_ATTR_RELATIME
            };
        }
        attr
    }
}

/// What one option means.
#[derive(Debug, Clone, Copy)]
enum Meaning {
    Nothing,
    Flag(MsFlags, bool),
    Superblock(MsFlags, bool),
    Recursive(MsFlags, bool),
    Propagation(MsFlags),
    Bind { recursive: bool },
    Remount,
    Copyup,
    Idmap { recursive: bool },
}

/// runc's mount options (runc 1.3); anything else is the filesystem's.
const OPTIONS: &[(&str, Meaning)] = {
    use Meaning::*;
    const RO: MsFlags = MsFlags::MS_RDONLY;
    const NOSUID: MsFlags = MsFlags::MS_NOSUID;
    const NODEV: MsFlags = MsFlags::MS_NODEV;
    const NOEXEC: MsFlags = MsFlags::MS_NOEXEC;
    const NOATIME: MsFlags = MsFlags::MS_NOATIME;
    const NODIRATIME: MsFlags = MsFlags::MS_NODIRATIME;
    const RELATIME: MsFlags = MsFlags::MS_RELATIME;
    const STRICTATIME: MsFlags = MsFlags::MS_STRICTATIME;
    const NOSYMFOLLOW: MsFlags = MS_NOSYMFOLLOW;
    &[
        ("defaults", Nothing),
        ("ro", Flag(RO, true)),
        ("rw", Flag(RO, false)),
        ("nosuid", Flag(NOSUID, true)),
        ("suid", Flag(NOSUID, false)),
        ("nodev", Flag(NODEV, true)),
        ("dev", Flag(NODEV, false)),
        ("noexec", Flag(NOEXEC, true)),
        ("exec", Flag(NOEXEC, false)),
        ("noatime", Flag(NOATIME, true)),
        ("atime", Flag(NOATIME, false)),
        ("nodiratime", Flag(NODIRATIME, true)),
        ("diratime", Flag(NODIRATIME, false)),
        ("relatime", Flag(RELATIME, true)),
        ("norelatime", Flag(RELATIME, false)),
        ("strictatime", Flag(STRICTATIME, true)),
        ("nostrictatime", Flag(STRICTATIME, false)),
        ("nosymfollow", Flag(NOSYMFOLLOW, true)),
        ("symfollow", Flag(NOSYMFOLLOW, false)),
        ("sync", Superblock(MsFlags::MS_SYNCHRONOUS, true)),
        ("async", Superblock(MsFlags::MS_SYNCHRONOUS, false)),
        ("dirsync", Superblock(MsFlags::MS_DIRSYNC, true)),
        ("mand", Superblock(MsFlags::MS_MANDLOCK, true)),
        ("nomand", Superblock(MsFlags::MS_MANDLOCK, false)),
        ("lazytime", Superblock(MsFlags::MS_LAZYTIME, true)),
        ("nolazytime", Superblock(MsFlags::MS_LAZYTIME, false)),
        ("iversion", Superblock(MsFlags::MS_I_VERSION, true)),
        ("noiversion", Superblock(MsFlags::MS_I_VERSION, false)),
        ("silent", Superblock(MsFlags::MS_SILENT, true)),
        ("loud", Superblock(MsFlags::MS_SILENT, false)),
        ("rro", Recursive(RO, true)),
        ("rrw", Recursive(RO, false)),
        ("rnosuid", Recursive(NOSUID, true)),
        ("rsuid", Recursive(NOSUID, false)),
        ("rnodev", Recursive(NODEV, true)),
        ("rdev", Recursive(NODEV, false)),
        ("rnoexec", Recursive(NOEXEC, true)),
        ("rexec", Recursive(NOEXEC, false)),
        ("rnoatime", Recursive(NOATIME, true)),
        ("ratime", Recursive(NOATIME, false)),
        ("rnodiratime", Recursive(NODIRATIME, true)),
        ("rdiratime", Recursive(NODIRATIME, false)),
        ("rrelatime", Recursive(RELATIME, true)),
        ("rnorelatime", Recursive(RELATIME, false)),
        ("rstrictatime", Recursive(STRICTATIME, true)),
        ("rnostrictatime", Recursive(STRICTATIME, false)),
        ("rnosymfollow", Recursive(NOSYMFOLLOW, true)),
        ("rsymfollow", Recursive(NOSYMFOLLOW, false)),
        ("private", Propagation(MsFlags::MS_PRIVATE)),
        ("rprivate", Propagation(MsFlags::MS_PRIVATE.union(MsFlags::MS_REC))),
        ("slave", Propagation(MsFlags::MS_SLAVE)),
        ("rslave", Propagation(MsFlags::MS_SLAVE.union(MsFlags::MS_REC))),
        ("shared", Propagation(MsFlags::MS_SHARED)),
        ("rshared", Propagation(MsFlags::MS_SHARED.union(MsFlags::MS_REC))),
        ("unbindable", Propagation(MsFlags::MS_UNBINDABLE)),
        ("runbindable", Propagation(MsFlags::MS_UNBINDABLE.union(MsFlags::MS_REC))),
        ("bind", Bind { recursive: false }),
        ("rbind", Bind { recursive: true }),
        ("remount", Remount),
        ("tmpcopyup", Copyup),
        ("idmap", Idmap { recursive: false }),
        ("ridmap", Idmap { recursive: true }),
    ]
};

fn meaning(option: &str) -> Option<Meaning> {
    OPTIONS.iter().find(|(name, _)| *name == option).map(|(_, m)| *m)
}

/// Whether `option` sets or clears a superblock flag.
pub fn is_superblock_flag(option: &str) -> bool {
    matches!(meaning(option), Some(Meaning::Superblock(..)))
}

/// Whether `option` is none of runc's: the filesystem's own data.
pub fn is_filesystem_data(option: &str) -> bool {
    meaning(option).is_none()
}

/// The plan of every mount in `mounts`, in order.
pub fn plan(mounts: &[Mount]) -> Vec<PlannedMount> {
    mounts.iter().enumerate().map(|(index, m)| plan_one(index, m)).collect()
}

/// The plan of one mount.
pub fn plan_one(index: usize, mount: &Mount) -> PlannedMount {
    let mut planned = PlannedMount {
        index,
        destination: mount.destination().clone(),
        source: mount.source().clone(),
        kind: Kind::New { fstype: mount.typ().clone().unwrap_or_default() },
        flags: Flags::default(),
        superblock: Flags::default(),
        recursive: Flags::default(),
        propagation: Vec::new(),
        data: Vec::new(),
        remount: false,
        copyup: false,
        idmap: None,
    };
    let mut recursive_bind = false;
    let mut recursive_idmap = false;
    for option in mount.options().as_deref().unwrap_or_default() {
        match meaning(option) {
            None => planned.data.push(option.clone()),
            Some(Meaning::Nothing) => {}
            Some(Meaning::Flag(flag, set)) => planned.flags.apply(flag, set),
            Some(Meaning::Superblock(flag, set)) => planned.superblock.apply(flag, set),
            Some(Meaning::Recursive(flag, set)) => planned.recursive.apply(flag, set),
            Some(Meaning::Propagation(flags)) => planned.propagation.push(flags),
            Some(Meaning::Bind { recursive }) => recursive_bind |= recursive,
            Some(Meaning::Remount) => planned.remount = true,
            Some(Meaning::Copyup) => planned.copyup = true,
            Some(Meaning::Idmap { recursive }) => recursive_idmap |= recursive,
        }
    }
    if is_bind(mount) {
        planned.kind = Kind::Bind { recursive: recursive_bind };
    }
    if is_idmapped(mount) {
        planned.idmap = Some(Idmap { recursive: recursive_idmap });
    }
    planned
}

#[cfg(test)]
mod tests {
    use libcontainer::rootfs::utils::{parse_mount, MountOptionConfig};
    use oci_spec::runtime::MountBuilder;

    use super::*;

    fn mount(typ: &str, options: &[&str]) -> Mount {
        MountBuilder::default()
            .destination("/mnt")
            .typ(typ)
            .source(if typ == "bind" { "/src" } else { typ })
            .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap()
    }

    fn planned(typ: &str, options: &[&str]) -> PlannedMount {
        plan_one(0, &mount(typ, options))
    }

    fn attr(set: u64, clear: u64) -> MountAttr {
        MountAttr::flags(set, clear)
    }

    #[test]
    fn a_default_spec_mount_reads_as_runc_reads_it() {
        let p = planned("tmpfs", &["nosuid", "strictatime", "mode=755", "size=65536k"]);
        assert_eq!(p.kind, Kind::New { fstype: "tmpfs".into() });
        assert_eq!(p.data, ["mode=755", "size=65536k"]);
        assert_eq!(p.flags.set, MsFlags::MS_NOSUID | MsFlags::MS_STRICTATIME);
        assert_eq!(p.flags.to_attr(), attr(libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_STRICTATIME, libc::MOUNT_ATTR__ATIME));
        assert_eq!(p.recursive, Flags::default());
        assert!(p.propagation.is_empty() && !p.copyup && !p.remount && p.idmap.is_none());
    }

    #[test]
    fn a_later_option_undoes_an_earlier_one_and_unnamed_flags_are_left_alone() {
        let p = planned("bind", &["rbind", "ro", "nosuid", "rw"]);
        assert_eq!(p.kind, Kind::Bind { recursive: true });
        assert_eq!(p.flags.to_attr(), attr(libc::MOUNT_ATTR_NOSUID, libc::MOUNT_ATTR_RDONLY));
        let p = planned("bind", &["bind", "rro", "rrw", "rnoexec"]);
        assert_eq!(p.kind, Kind::Bind { recursive: false });
        assert_eq!(p.recursive.to_attr(), attr(libc::MOUNT_ATTR_NOEXEC, libc::MOUNT_ATTR_RDONLY));
        assert_eq!(p.flags.to_attr(), MountAttr::default());
    }

    #[test]
    fn the_atime_mode_is_the_one_mount_2_would_pick() {
        let mode = |options: &[&str]| planned("tmpfs", options).flags.to_attr();
        let clear = libc::MOUNT_ATTR__ATIME;
        assert_eq!(mode(&["noatime"]), attr(libc::MOUNT_ATTR_NOATIME, clear));
        assert_eq!(mode(&["noatime", "strictatime"]), attr(libc::MOUNT_ATTR_STRICTATIME, clear));
        assert_eq!(mode(&["strictatime", "nostrictatime"]), attr(libc::MOUNT_ATTR_RELATIME, clear));
        assert_eq!(mode(&["noatime", "atime"]), attr(libc::MOUNT_ATTR_RELATIME, clear));
        assert_eq!(mode(&["nodiratime"]), attr(libc::MOUNT_ATTR_NODIRATIME, 0));
        assert_eq!(planned("tmpfs", &["rnoatime", "ratime"]).recursive.to_attr(), attr(libc::MOUNT_ATTR_RELATIME, clear));
    }

    #[test]
    fn propagation_copyup_idmap_and_superblock_flags_have_their_own_fields() {
        let p = planned("bind", &["rbind", "rslave", "shared", "ridmap", "nosymfollow"]);
        assert_eq!(p.propagation, [MsFlags::MS_SLAVE | MsFlags::MS_REC, MsFlags::MS_SHARED]);
        assert_eq!(p.idmap, Some(Idmap { recursive: true }));
        assert_eq!(p.flags.to_attr(), attr(libc::MOUNT_ATTR_NOSYMFOLLOW, 0));
        let p = planned("tmpfs", &["tmpcopyup", "lazytime", "sync", "async", "remount"]);
        assert!(p.copyup && p.remount);
        assert_eq!(p.superblock.set, MsFlags::MS_LAZYTIME);
        assert_eq!(p.superblock.named, MsFlags::MS_LAZYTIME | MsFlags::MS_SYNCHRONOUS);
        assert!(p.data.is_empty());
    }

    /// Our plan in the engine's shape, for the options the engine knows.
    fn as_engine(p: &PlannedMount) -> MountOptionConfig {
        let mut flags = p.flags.set | p.superblock.set;
        if let Kind::Bind { recursive } = p.kind {
            flags |= MsFlags::MS_BIND;
            flags.set(MsFlags::MS_REC, recursive);
        }
        flags.set(MsFlags::MS_REMOUNT, p.remount);
        let rec = (p.recursive.named != MsFlags::empty()).then(|| {
            let a = p.recursive.to_attr();
            libcontainer::syscall::linux::MountAttr { attr_set: a.set, attr_clr: a.clear, propagation: 0, userns_fd: 0 }
        });
        MountOptionConfig { flags, data: p.data.clone(), rec_attr: rec }
    }

    /// The options the engine reads as runc does.
    const AGREED: &[&str] = &[
        "defaults",
        "ro",
        "rw",
        "nosuid",
        "suid",
        "nodev",
        "dev",
        "noexec",
        "exec",
        "noatime",
        "atime",
        "nodiratime",
        "diratime",
        "relatime",
        "norelatime",
        "strictatime",
        "nostrictatime",
        "sync",
        "async",
        "dirsync",
        "mand",
        "nomand",
        "remount",
        "rro",
        "rnosuid",
        "rnodev",
        "rnoexec",
        "rnoatime",
        "ratime",
        "rnodiratime",
        "rrelatime",
        "rstrictatime",
        "rnostrictatime",
        "rnorelatime",
        "rnosymfollow",
        "rrw",
        "rsuid",
        "rdev",
        "rexec",
        "rdiratime",
        "rsymfollow",
        "mode=755",
        "size=1m",
        "uid=5",
    ];

    /// Two recursive options where the second undoes the first, or picks
    /// another atime mode.
    fn recursive_conflict(first: &str, second: &str) -> bool {
        match (meaning(first), meaning(second)) {
            (Some(Meaning::Recursive(a, x)), Some(Meaning::Recursive(b, y))) => {
                (a == b && x != y) || (a != b && ATIME_MODES.contains(a) && ATIME_MODES.contains(b))
            }
            _ => false,
        }
    }

    #[test]
    fn where_the_engine_reads_options_as_runc_our_plan_agrees() {
        for first in AGREED {
            for second in AGREED {
                for typ in ["tmpfs", "bind"] {
                    let options = if typ == "bind" { vec!["rbind", *first, *second] } else { vec![*first, *second] };
                    let m = mount(typ, &options);
                    if recursive_conflict(first, second) {
                        continue; // the engine never undoes a recursive option: pinned below
                    }
                    assert_eq!(as_engine(&plan_one(0, &m)), parse_mount(&m).unwrap(), "{typ} {options:?}");
                }
            }
        }
    }

    /// Where the engine's reading loses an option, which is why the rootfs
    /// steps read the spec themselves. If the engine is fixed, this fails.
    #[test]
    fn the_engine_loses_these_options() {
        let engine = |options: &[&str]| parse_mount(&mount("bind", options)).unwrap();
        // nosymfollow, superblock flags and tmpcopyup become filesystem data:
        // a bind ignores them, a new filesystem fails with them.
        for option in ["nosymfollow", "symfollow", "lazytime", "nolazytime", "iversion", "noiversion", "silent", "loud", "tmpcopyup"] {
            assert_eq!(engine(&[option]).data, [option], "{option}");
            assert!(planned("bind", &[option]).data.is_empty(), "{option}");
        }
        // Propagation clears its own flag from the word, so it is lost.
        for option in ["private", "slave", "shared"] {
            assert_eq!(engine(&["bind", option]).flags, MsFlags::MS_BIND, "{option}");
        }
        assert_eq!(engine(&["rbind", "rprivate"]).flags, MsFlags::MS_BIND, "rprivate drops the bind's MS_REC");
        // A later recursive option does not undo an earlier one.
        let rec = engine(&["rro", "rrw"]).rec_attr.unwrap();
        assert_eq!((rec.attr_set, rec.attr_clr), (libc::MOUNT_ATTR_RDONLY, libc::MOUNT_ATTR_RDONLY));
        assert_eq!(planned("bind", &["rro", "rrw"]).recursive.to_attr(), attr(0, libc::MOUNT_ATTR_RDONLY));
        // Two recursive atime modes are both set: mount_setattr(2) refuses that.
        let rec = engine(&["rstrictatime", "rnoatime"]).rec_attr.unwrap();
        assert_eq!(rec.attr_set, libc::MOUNT_ATTR_STRICTATIME | libc::MOUNT_ATTR_NOATIME);
        assert_eq!(
            planned("bind", &["rstrictatime", "rnoatime"]).recursive.to_attr(),
            attr(libc::MOUNT_ATTR_STRICTATIME, libc::MOUNT_ATTR__ATIME)
        );
    }
}

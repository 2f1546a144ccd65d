//! The device rules a container's cgroup gets, on v1 (written to
//! `devices.allow`/`devices.deny`) and on v2 (compiled by `device_filter`),
//! so both kinds of host allow the same devices.

use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType, LinuxResources};

/// The container's own rules, then the devices every container may use:
/// runc's list. Not the host's console (c 5:1), which libcgroups and crun
/// still allow: a container's /dev/console is a pty (major 136), and a
/// CAP_MKNOD process would otherwise reach the host's own console.
pub fn container_rules(resources: Option<&LinuxResources>) -> Vec<LinuxDeviceCgroup> {
    let own = resources.and_then(|r| r.devices().clone()).unwrap_or_default();
    let allow = |typ, major: Option<i64>, minor: Option<i64>, access: &str| {
        let mut rule = LinuxDeviceCgroup::default();
        rule.set_allow(true);
        rule.set_typ(Some(typ));
        rule.set_major(major);
        rule.set_minor(minor);
        rule.set_access(Some(access.to_string()));
        rule
    };
    use LinuxDeviceType::{B, C};
    let defaults = [
        // null, zero, full, tty, urandom, random
        allow(C, Some(1), Some(3), "rwm"),
        allow(C, Some(1), Some(5), "rwm"),
        allow(C, Some(1), Some(7), "rwm"),
        allow(C, Some(5), Some(0), "rwm"),
        allow(C, Some(1), Some(9), "rwm"),
        allow(C, Some(1), Some(8), "rwm"),
        // mknod of anything; pts, ptmx, tun
        allow(C, None, None, "m"),
        allow(B, None, None, "m"),
        allow(C, Some(136), None, "rwm"),
        allow(C, Some(5), Some(2), "rwm"),
        allow(C, Some(10), Some(200), "rwm"),
    ];
    own.into_iter().chain(defaults).collect()
}

/// A rule as v1's devices controller takes it: the file (`devices.allow`
/// or `devices.deny`) and the line. None for a FIFO, which no device
/// cgroup governs (runc skips it too).
pub fn v1_line(rule: &LinuxDeviceCgroup) -> Option<(&'static str, String)> {
    let kind = match rule.typ().unwrap_or(LinuxDeviceType::A) {
        LinuxDeviceType::A => "a",
        LinuxDeviceType::B => "b",
        LinuxDeviceType::C | LinuxDeviceType::U => "c",
        LinuxDeviceType::P => return None,
    };
    let number = |n: Option<i64>| n.filter(|n| *n >= 0).map_or("*".to_string(), |n| n.to_string());
    let access = rule.access().as_deref().filter(|a| !a.is_empty()).unwrap_or("rwm");
    let file = if rule.allow() { "devices.allow" } else { "devices.deny" };
    Some((file, format!("{kind} {}:{} {access}", number(rule.major()), number(rule.minor()))))
}

/// The line that takes the host's console back where libcgroups' own
/// list (the engine's intermediate, and resources `v1_setup` leaves to
/// it) allowed it; None where the container's own rules allow it.
pub fn v1_console_denial(resources: Option<&LinuxResources>) -> Option<&'static str> {
    let filter = crate::engine::cgroup::device_filter::Filter::from_rules(&container_rules(resources)).ok()?;
    (!filter.allows_char(5, 1)).then_some("c 5:1 rwm")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(allow: bool, typ: Option<LinuxDeviceType>, major: Option<i64>, minor: Option<i64>, access: Option<&str>) -> LinuxDeviceCgroup {
        let mut r = LinuxDeviceCgroup::default();
        r.set_allow(allow);
        r.set_typ(typ);
        r.set_major(major);
        r.set_minor(minor);
        r.set_access(access.map(str::to_string));
        r
    }

    #[test]
    fn v1_lines_are_the_kernels_syntax() {
        use LinuxDeviceType::*;
        assert_eq!(v1_line(&rule(false, None, None, None, Some("rwm"))), Some(("devices.deny", "a *:* rwm".into())));
        assert_eq!(v1_line(&rule(true, Some(C), Some(1), Some(3), None)), Some(("devices.allow", "c 1:3 rwm".into())));
        assert_eq!(v1_line(&rule(true, Some(U), Some(136), Some(-1), Some("rw"))), Some(("devices.allow", "c 136:* rw".into())));
        assert_eq!(v1_line(&rule(true, Some(B), None, Some(0), Some("m"))), Some(("devices.allow", "b *:0 m".into())));
        assert_eq!(v1_line(&rule(true, Some(P), Some(1), Some(1), Some("rwm"))), None);
    }

    #[test]
    fn the_console_is_taken_back_unless_the_config_allows_it() {
        assert_eq!(v1_console_denial(None), Some("c 5:1 rwm"));
        let mut privileged = LinuxResources::default();
        privileged.set_devices(Some(vec![rule(true, None, None, None, Some("rwm"))]));
        assert_eq!(v1_console_denial(Some(&privileged)), None);
        let mut console = LinuxResources::default();
        console.set_devices(Some(vec![rule(true, Some(LinuxDeviceType::C), Some(5), Some(1), Some("rw"))]));
        assert_eq!(v1_console_denial(Some(&console)), None);
    }

    #[test]
    fn own_rules_come_before_the_defaults() {
        let mut resources = LinuxResources::default();
        resources.set_devices(Some(vec![rule(false, None, None, None, Some("rwm"))]));
        let rules = container_rules(Some(&resources));
        assert_eq!(rules.len(), 12);
        assert_eq!(v1_line(&rules[0]).unwrap().1, "a *:* rwm");
        assert_eq!(v1_line(&rules[1]).unwrap().1, "c 1:3 rwm");
        assert_eq!(container_rules(None).len(), 11);
        assert!(!rules.iter().any(|r| r.major() == Some(5) && r.minor() == Some(1)), "the host's console");
    }
}

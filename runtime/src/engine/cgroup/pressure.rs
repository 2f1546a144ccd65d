//! Pressure stall information of a cgroup v2 directory (`cpu.pressure`,
//! `memory.pressure`, `io.pressure`) in runc's `events --stats` shape, which
//! runc prints from 1.2 on. libcgroups 0.7's PSI reader drops `total`, which
//! runc prints, so the files are parsed here.

use std::io::ErrorKind;
use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Error, Result};

/// One line of a pressure file (`some` or `full`).
#[derive(Debug, Default, PartialEq)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Total stall time, in microseconds.
    pub total: u64,
}

/// A pressure file: the share of time some, or all, tasks stalled.
#[derive(Debug, Default, PartialEq)]
pub struct Pressure {
    pub some: PressureLine,
    pub full: PressureLine,
}

/// The pressure files runc reads for a cgroup: cpu always, memory and io
/// where their controllers are enabled.
#[derive(Debug, Default, PartialEq)]
pub struct CgroupPressure {
    pub cpu: Option<Pressure>,
    pub memory: Option<Pressure>,
    pub io: Option<Pressure>,
}

/// The cgroup's pressure files, given its `cgroup.controllers`.
pub fn read_cgroup(dir: &Path, controllers: &[&str]) -> Result<CgroupPressure> {
    let if_enabled = |name: &str| match controllers.contains(&name) {
        true => read(dir, name),
        false => Ok(None),
    };
    Ok(CgroupPressure { cpu: read(dir, "cpu")?, memory: if_enabled("memory")?, io: if_enabled("io")? })
}

/// `<resource>.pressure` in `dir`; None when the kernel has no PSI (the file
/// is missing, or reading it says EOPNOTSUPP with `psi=0`), as runc does.
pub fn read(dir: &Path, resource: &str) -> Result<Option<Pressure>> {
    let path = dir.join(format!("{resource}.pressure"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::EOPNOTSUPP) => return Ok(None),
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    parse(&text).map(Some).ok_or_else(|| Error::Invalid(format!("{}: not a pressure file: {text:?}", path.display())))
}

/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and the same for `full`.
fn parse(text: &str) -> Option<Pressure> {
    let mut pressure = Pressure::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let target = match fields.next()? {
            "some" => &mut pressure.some,
            "full" => &mut pressure.full,
            _ => continue,
        };
        for (key, value) in fields.map(|kv| kv.split_once('=')).collect::<Option<Vec<_>>>()? {
            match key {
                "avg10" => target.avg10 = value.parse().ok()?,
                "avg60" => target.avg60 = value.parse().ok()?,
                "avg300" => target.avg300 = value.parse().ok()?,
                "total" => target.total = value.parse().ok()?,
                _ => {}
            }
        }
    }
    Some(pressure)
}

/// runc's `PSIStats`: both lines, every field (its `PSIData` has no omitempty).
pub fn runc_shape(pressure: &Pressure) -> Value {
    let line = |l: &PressureLine| json!({"avg10": l.avg10, "avg60": l.avg60, "avg300": l.avg300, "total": l.total});
    json!({"some": line(&pressure.some), "full": line(&pressure.full)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_lines_with_their_totals() {
        let p = parse("some avg10=1.50 avg60=0.25 avg300=0.00 total=1234\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=56\n").unwrap();
        assert_eq!(p.some, PressureLine { avg10: 1.5, avg60: 0.25, avg300: 0.0, total: 1234 });
        assert_eq!(p.full.total, 56);
        assert_eq!(runc_shape(&p)["some"]["total"], 1234);
    }

    #[test]
    fn garbage_is_refused() {
        assert_eq!(parse("some avg10=x\n"), None);
        assert_eq!(parse("some avg10\n"), None);
    }

    #[test]
    fn a_missing_file_is_no_pressure() {
        assert_eq!(read(Path::new("/nonexistent-rustpod-dir"), "cpu").unwrap(), None);
    }
}

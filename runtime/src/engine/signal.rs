//! Signal names as runc takes them: `KILL`, `SIGKILL`, `kill` or `9`.

use std::str::FromStr;

use nix::sys::signal::Signal;

use crate::error::{Error, Result};

pub fn parse(raw: &str) -> Result<Signal> {
    let invalid = || Error::InvalidSignal(raw.to_string());
    if let Ok(number) = raw.parse::<i32>() {
        return Signal::try_from(number).map_err(|_| invalid());
    }
    let upper = raw.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
    Signal::from_str(&name).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_runc_spellings() {
        for s in ["KILL", "SIGKILL", "kill", "9"] {
            assert_eq!(parse(s).unwrap(), Signal::SIGKILL, "{s}");
        }
        assert_eq!(parse("term").unwrap(), Signal::SIGTERM);
    }

    #[test]
    fn rejects_unknown() {
        for s in ["SIGFOO", "", "0x9", "999", "-1"] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}

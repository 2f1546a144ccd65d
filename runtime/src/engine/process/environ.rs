//! The container process's environment, handed from libcontainer's
//! `setup_envs` to our executor's exec in one piece. libcontainer's default
//! `setup_envs` sets each variable with setenv(3), which walks the whole
//! environment every time: 100 000 variables (a 2 MB config) took minutes in
//! the init, where runc ≥ 1.2 passes its list to execve as it is.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::sync::OnceLock;

/// What libcontainer gave `setup_envs` (the spec's env with HOME and the
/// socket-activation variables it adds), kept in the init for its exec.
static ENVIRONMENT: OnceLock<HashMap<String, String>> = OnceLock::new();

/// Why the kept environment cannot be handed to the exec; each message is
/// the one line the container's init fails with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvironError {
    #[error("setup_envs: the environment was already set")]
    AlreadySet,
    #[error("exec: setup_envs was not called before exec")]
    NotSet,
    #[error("exec: an environment variable contains a NUL byte: {0}")]
    Nul(#[from] std::ffi::NulError),
}

/// Keeps `envs` for `for_exec`; the init calls this once, before its exec.
pub fn keep(envs: HashMap<String, String>) -> Result<(), EnvironError> {
    ENVIRONMENT.set(envs).map_err(|_| EnvironError::AlreadySet)
}

/// The kept environment as execve(2)'s `envp`, in `spec_env`'s order.
pub fn for_exec(spec_env: &[String]) -> Result<Vec<CString>, EnvironError> {
    let kept = ENVIRONMENT.get().ok_or(EnvironError::NotSet)?;
    as_envp(ordered(spec_env, kept))
}

/// `pairs` as C strings; a NUL byte inside one is refused.
fn as_envp(pairs: Vec<String>) -> Result<Vec<CString>, EnvironError> {
    pairs.into_iter().map(|pair| Ok(CString::new(pair)?)).collect()
}

/// `KEY=value` for each key of `vars`: first in the order of each key's last
/// occurrence in `spec_env` (as runc ≥ 1.2 deduplicates), then the keys the
/// spec does not name (HOME, LISTEN_FDS…), sorted.
pub fn ordered(spec_env: &[String], vars: &HashMap<String, String>) -> Vec<String> {
    let key = |pair: &str| pair.split('=').next().unwrap_or_default().to_string();
    let mut seen = HashSet::with_capacity(vars.len());
    let mut pairs: Vec<String> =
        spec_env.iter().rev().map(|pair| key(pair)).filter(|k| vars.contains_key(k) && seen.insert(k.clone())).collect();
    pairs.reverse();
    let mut rest: Vec<String> = vars.keys().filter(|k| !seen.contains(*k)).cloned().collect();
    rest.sort();
    pairs.extend(rest);
    pairs.into_iter().map(|k| format!("{k}={}", vars[&k])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_spec_order_is_kept_and_a_repeated_key_takes_its_last_place() {
        let spec: Vec<String> = ["B=1", "A=1", "C=1", "B=2"].map(String::from).into();
        let got = ordered(&spec, &vars(&[("A", "1"), ("B", "2"), ("C", "1")]));
        assert_eq!(got, ["A=1", "C=1", "B=2"]);
    }

    #[test]
    fn variables_libcontainer_added_come_last_sorted() {
        let spec: Vec<String> = ["PATH=/bin"].map(String::from).into();
        let got = ordered(&spec, &vars(&[("PATH", "/bin"), ("LISTEN_FDS", "1"), ("HOME", "/root")]));
        assert_eq!(got, ["PATH=/bin", "HOME=/root", "LISTEN_FDS=1"]);
    }

    #[test]
    fn values_with_equals_signs_are_whole() {
        let spec: Vec<String> = ["X=a=b"].map(String::from).into();
        assert_eq!(ordered(&spec, &vars(&[("X", "a=b")])), ["X=a=b"]);
    }

    #[test]
    fn a_nul_byte_is_refused_in_one_line() {
        let err = as_envp(vec!["A=1".into(), "B=x\0y".into()]).unwrap_err();
        assert!(matches!(err, EnvironError::Nul(_)));
        assert_eq!(err.to_string(), "exec: an environment variable contains a NUL byte: nul byte found in provided data at position: 3");
        assert_eq!(as_envp(vec!["A=1".into()]).unwrap(), vec![CString::new("A=1").unwrap()]);
    }
}

//! The engine's last step inside the container: find the program and exec
//! it, saying why it cannot run in runc's words (`exec: "x": …`), which
//! docker, containerd and kubelet map to exit codes 127/126 and reasons.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use libcontainer::workload::{Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError};
use oci_spec::runtime::Spec;

use super::environ;

/// What a path is, as far as running it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// stat failed with this error text (`no such file or directory`).
    Missing(String),
    /// A directory: Go 1.20's exec.LookPath (so runc 1.2+) says EISDIR.
    Directory,
    /// No execute bit.
    NotExecutable,
    Executable,
}

/// Why the process's program cannot be run. The `exec: "x": …` words are
/// runc's: clients map them to exit codes 127/126.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    #[error("the spec has no process")]
    NoProcess,
    #[error("process.args is empty")]
    NoArgs,
    #[error("exec: {0:?}: permission denied")]
    NotExecutable(String),
    #[error("exec: {0:?}: is a directory")]
    Directory(String),
    /// stat failed; `why` is its errno as Go words it.
    #[error("exec: {program:?}: stat {program}: {why}")]
    Missing { program: String, why: String },
    #[error("exec: {0:?}: executable file not found in $PATH")]
    NotInPath(String),
}

/// Looks `program` up as Go's exec.LookPath (and so runc) does: a name
/// with a `/` is taken as it is, a bare name is searched in `path_var`.
pub fn resolve(program: &str, path_var: Option<&str>, probe: impl Fn(&Path) -> Probe) -> Result<PathBuf, ProgramError> {
    if program.contains('/') {
        return match probe(Path::new(program)) {
            Probe::Executable => Ok(PathBuf::from(program)),
            Probe::NotExecutable => Err(ProgramError::NotExecutable(program.to_string())),
            Probe::Directory => Err(ProgramError::Directory(program.to_string())),
            Probe::Missing(why) => Err(ProgramError::Missing { program: program.to_string(), why }),
        };
    }
    for dir in path_var.unwrap_or_default().split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = Path::new(dir).join(program);
        if probe(&candidate) == Probe::Executable {
            return Ok(candidate);
        }
    }
    Err(ProgramError::NotInPath(program.to_string()))
}

/// The real file system's answer for `path`.
pub fn probe(path: &Path) -> Probe {
    match std::fs::metadata(path) {
        Err(e) => Probe::Missing(errno_text(&e)),
        Ok(m) if m.is_dir() => Probe::Directory,
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Probe::NotExecutable,
        Ok(_) => Probe::Executable,
    }
}

/// `no such file or directory`, as Go (and runc) words an errno.
fn errno_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_lowercase(),
        None => e.to_string(),
    }
}

/// `validate` finds the program once, before the start wait and the
/// startContainer hooks, as runc's LookPath; `exec` runs what it found
/// instead of searching $PATH again.
#[derive(Clone, Default)]
pub struct RuncWordsExecutor {
    found: std::sync::OnceLock<(Vec<String>, PathBuf)>,
}

impl RuncWordsExecutor {
    fn found(&self, spec: &Spec) -> Result<(Vec<String>, PathBuf), ProgramError> {
        if let Some(found) = self.found.get() {
            return Ok(found.clone());
        }
        let found = Self::program(spec)?;
        Ok(self.found.get_or_init(|| found).clone())
    }

    fn program(spec: &Spec) -> Result<(Vec<String>, PathBuf), ProgramError> {
        let process = spec.process().as_ref().ok_or(ProgramError::NoProcess)?;
        let args = process.args().clone().filter(|a| !a.is_empty()).ok_or(ProgramError::NoArgs)?;
        let path_var = process.env().as_ref().and_then(|env| env.iter().find_map(|e| e.strip_prefix("PATH=")).map(str::to_string));
        let path = resolve(&args[0], path_var.as_deref(), probe)?;
        Ok((args, path))
    }
}

impl Executor for RuncWordsExecutor {
    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        self.found(spec).map(|_| ()).map_err(|e| ExecutorValidationError::ArgValidationError(e.to_string()))
    }

    /// Keeps the environment for `exec` instead of setenv(3) per variable
    /// (quadratic; see `environ`), after clearing the one inherited.
    fn setup_envs(&self, envs: HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        // SAFETY: the init is single-threaded here (a cloned child before its exec).
        std::env::vars_os().for_each(|(key, _)| unsafe { std::env::remove_var(key) });
        environ::keep(envs).map_err(|e| ExecutorSetEnvsError::Other(e.to_string()))
    }

    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        let (args, path) = self.found(spec).map_err(|e| ExecutorError::Other(e.to_string()))?;
        let c = |s: &str| CString::new(s).map_err(|_| ExecutorError::Other(format!("exec: {s:?}: contains a NUL byte")));
        let argv = args.iter().map(|a| c(a)).collect::<Result<Vec<_>, _>>()?;
        let file = c(&path.to_string_lossy())?;
        let spec_env = spec.process().as_ref().and_then(|p| p.env().as_deref()).unwrap_or_default();
        let envp = environ::for_exec(spec_env).map_err(|e| ExecutorError::Other(e.to_string()))?;
        let err = nix::unistd::execve(&file, &argv, &envp).unwrap_err();
        Err(ExecutorError::Other(format!("exec: {:?}: {}", args[0], err.desc().to_lowercase())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(path: &Path) -> Probe {
        match path.to_str().unwrap() {
            "/bin/sh" | "/usr/bin/env" | "./run.sh" => Probe::Executable,
            "/etc" => Probe::Directory,
            "/etc/passwd" => Probe::NotExecutable,
            _ => Probe::Missing("no such file or directory".into()),
        }
    }

    #[test]
    fn missing_path_is_worded_as_runc() {
        assert_eq!(
            resolve("/no/such/bin", None, fs).unwrap_err().to_string(),
            r#"exec: "/no/such/bin": stat /no/such/bin: no such file or directory"#
        );
    }

    #[test]
    fn a_file_that_cannot_run_is_permission_denied() {
        let err = resolve("/etc/passwd", None, fs).unwrap_err();
        assert_eq!(err, ProgramError::NotExecutable("/etc/passwd".into()));
        assert_eq!(err.to_string(), r#"exec: "/etc/passwd": permission denied"#);
    }

    #[test]
    fn a_directory_is_a_directory_as_runc_1_2_words_it() {
        assert_eq!(resolve("/etc", None, fs).unwrap_err().to_string(), r#"exec: "/etc": is a directory"#);
    }

    #[test]
    fn bare_names_are_searched_in_path_in_order() {
        assert_eq!(resolve("env", Some("/bin:/usr/bin"), fs).unwrap(), Path::new("/usr/bin/env"));
        assert_eq!(resolve("nosuch", Some("/bin"), fs).unwrap_err().to_string(), r#"exec: "nosuch": executable file not found in $PATH"#);
        assert!(resolve("sh", None, fs).is_err(), "no PATH: nothing is found");
    }

    #[test]
    fn absolute_and_relative_paths_need_no_path_variable() {
        assert_eq!(resolve("/bin/sh", None, fs).unwrap(), Path::new("/bin/sh"));
        assert_eq!(resolve("./run.sh", None, fs).unwrap(), Path::new("./run.sh"));
    }
}

//! Our createContainer steps inside the container's mount namespace run as
//! hooks that re-execute our binary with the rootfs and, per mount
//! destination, the options to apply; this builds and reads those argv.

/// An OCI hook that re-executes the running binary (`/proc/self/exe`) as
/// `arg0 <rootfs> (<destination> <options>)…`.
pub fn rootfs_hook<'a>(
    arg0: &str,
    rootfs: &std::path::Path,
    entries: impl IntoIterator<Item = (&'a std::path::Path, &'a [String])>,
) -> oci_spec::runtime::Hook {
    let mut args = vec![arg0.to_string(), rootfs.display().to_string()];
    for (destination, options) in entries {
        args.push(destination.display().to_string());
        args.push(options.join(","));
    }
    let mut hook = oci_spec::runtime::Hook::default();
    hook.set_path(std::path::PathBuf::from("/proc/self/exe"));
    hook.set_args(Some(args));
    hook
}

/// Parses [`rootfs_hook`]'s arguments: the rootfs, opened `O_PATH`, and
/// each (destination, options).
pub fn parse_rootfs_hook_args(
    args: Vec<std::ffi::OsString>,
) -> Result<(std::os::fd::OwnedFd, Vec<(std::path::PathBuf, Vec<String>)>), String> {
    let (rootfs, pairs) = args.split_first().ok_or("missing rootfs argument")?;
    if pairs.len() % 2 != 0 {
        return Err("arguments must be destination/options pairs".into());
    }
    let root = crate::in_root::open(None, std::path::Path::new(rootfs), libc::O_PATH)
        .map_err(|e| format!("open rootfs {rootfs:?}: {e}"))?;
    let entries = pairs
        .chunks(2)
        .map(|pair| {
            let options = pair[1].to_string_lossy().split(',').map(str::to_string).collect();
            (std::path::PathBuf::from(&pair[0]), options)
        })
        .collect();
    Ok((root, entries))
}

// A tmpfs over a directory of the image, without `mode=`, gets that directory's mode, as runc
// gives it; not tmpfs's own 1777, which would let any user of the container write there. The
// CLI's case is mounts_options'; here the clients that send such a mount: containerd's three
// paths (its runc shim driving runc, then rustpod, and our shim) and docker's `--tmpfs`, each
// next to runc in the same test. CRI sends none: kubelet's memory emptyDir is a host bind.

use rustpod_tests::clients::OciRuntime;
use rustpod_tests::docker::{self, Dockerd};
use rustpod_tests::scratch::{unique_name, ScratchDir};
use rustpod_tests::shim::{self, ShimContainerd};
use rustpod_tests::{json, skip_if, Bundle};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Modes, then what a write into the 0755 one says (the shell's words after its last colon).
fn script(dirs: &[&str], writable: &str) -> String {
    format!("stat -c '%a %n' {}; (printf x > {writable}/x) 2>&1 | sed 's/.*: //'", dirs.join(" "))
}

/// A spec of containerd's, as uid 1000, with tmpfs mounts without `mode=` over a 0750 and a
/// 0755 directory of the image: every path shows their modes as runc's does, and denies the write.
#[test]
fn every_containerd_path_keeps_the_image_directorys_mode() {
    skip_if!(shim::blocker_with_runc());
    let ctd = ShimContainerd::start();
    let (dir, rootfs) = (ScratchDir::new("tmpfs-mode"), Bundle::new(rustpod_tests::SLEEP));
    for (name, mode) in [("d750", 0o750), ("d755", 0o755)] {
        let path = Path::new(&rootfs.rootfs()).join(name);
        fs::create_dir(&path).expect("mkdir in the image");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod in the image");
    }
    let mut reference = None;
    for (path, flags) in shim::paths() {
        let id = unique_name(path);
        let mut spec = ctd.oci_spec(&id, &rootfs.rootfs());
        spec["process"]["args"] = json!(["sh", "-c", script(&["/d750", "/d755"], "/d755")]);
        spec["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        let mounts = spec["mounts"].as_array_mut().expect("ctr's spec has mounts");
        for dest in ["/d750", "/d755"] {
            mounts.push(json!({"destination": dest, "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "size=1m"]}));
        }
        let out = ctd.run_spec(&dir, &id, &spec, "--rm", &flags);
        assert_eq!(out.code(), 0, "{path}: {}", out.describe());
        assert_eq!(&out.stdout, reference.get_or_insert_with(|| out.stdout.clone()), "{path}: next to runc's");
    }
    assert_eq!(reference.as_deref(), Some("750 /d750\n755 /d755\nPermission denied\n"), "runc, the control");
}

/// `docker run --tmpfs` over the image's /root (0700) and /var (0755), as uid 1000: rustpod
/// shows their modes as runc does, and denies the write.
#[test]
fn docker_tmpfs_keeps_the_image_directorys_mode() {
    skip_if!(docker::blocker());
    let dockerd = Dockerd::shared();
    let argv = ["sh", "-c", &script(&["/root", "/var"], "/var")];
    let flags = ["--rm", "--network", "none", "--user", "1000:1000", "--tmpfs", "/root", "--tmpfs", "/var"];
    let [runc, ours] = OciRuntime::BOTH.map(|rt| dockerd.on_image("run", rt, &flags, &argv).ok().stdout);
    assert_eq!(runc, "700 /root\n755 /var\nPermission denied\n", "runc, the control");
    assert_eq!(ours, runc, "docker run --tmpfs with rustpod");
}

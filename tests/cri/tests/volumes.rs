// Scenario 4: kubelet-style volumes under <tmp>/var/lib/kubelet/pods/<uid>/volumes/..., the
// kubelet dir a shared mount, bound into containers with each CRI propagation mode: a host
// mount made after the containers started shows under HOST_TO_CONTAINER and BIDIRECTIONAL, not
// under PRIVATE; one made in the BIDIRECTIONAL container reaches the host. The sid guest runs
// it under containerd 2.1 for both handlers (runc 1.3.6 and rustpod).

use rustpod_cri_tests::cri::{self, MountPropagation};
use rustpod_cri_tests::{cri_or_skip, pod_config, pod_security, security, sleeper};
use rustpod_tests::host_mount::{is_mount_point, HostMounts};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn mount(host: &Path, container_path: &str, propagation: MountPropagation) -> cri::Mount {
    cri::Mount {
        container_path: container_path.into(),
        host_path: host.to_str().expect("UTF-8").into(),
        propagation: propagation as i32,
        ..Default::default()
    }
}

/// `<kubelet>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>`, mode 0750 as kubelet makes it.
fn volume(kubelet: &Path, uid: &str, name: &str) -> PathBuf {
    let dir = kubelet.join("pods").join(uid).join("volumes/kubernetes.io~empty-dir").join(name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    dir
}

#[test]
fn propagation_modes_and_file_mounts() {
    rustpod_tests::skip_if!(rustpod_cri_tests::blocker());
    let host = HostMounts::new("kubelet");
    let cri = cri_or_skip!();
    let kubelet = host.shared_dir("var/lib/kubelet");
    let mut pod_cfg = pod_config("volumes");
    pod_security(&mut pod_cfg).privileged = true; // for the BIDIRECTIONAL container
    let uid = pod_cfg.metadata.as_ref().unwrap().uid.clone();
    let data = volume(&kubelet, &uid, "data");
    let shared = volume(&kubelet, &uid, "shared");
    // The termination log: one file, 0666, bound at /dev/termination-log.
    let term_log = kubelet.join("pods").join(&uid).join("containers/h2c/1a2b3c4d");
    std::fs::create_dir_all(term_log.parent().unwrap()).unwrap();
    std::fs::write(&term_log, "").unwrap();
    std::fs::set_permissions(&term_log, std::fs::Permissions::from_mode(0o666)).unwrap();

    let pod = cri.run_pod_ok(&pod_cfg);
    let mut h2c = sleeper("h2c");
    h2c.mounts = vec![
        mount(&data, "/data", MountPropagation::PropagationHostToContainer),
        mount(&term_log, "/dev/termination-log", MountPropagation::PropagationPrivate),
    ];
    let h2c = cri.run_container(&pod, &h2c, &pod_cfg);
    let mut private = sleeper("private");
    private.mounts = vec![mount(&data, "/data", MountPropagation::PropagationPrivate)];
    let private = cri.run_container(&pod, &private, &pod_cfg);
    let mut bidi = sleeper("bidi");
    bidi.mounts = vec![mount(&shared, "/shared", MountPropagation::PropagationBidirectional)];
    security(&mut bidi).privileged = true;
    let bidi = cri.run_container(&pod, &bidi, &pod_cfg);

    // A host mount made after the containers started, at `<volume>/late`, holding `marker`.
    let mount_late = |volume: &Path, marker: &str| {
        let late = volume.join("late");
        std::fs::create_dir(&late).unwrap();
        host.tmpfs_with_marker(&late, marker);
    };
    mount_late(&data, "late-marker");
    assert_eq!(
        cri.sh(&h2c, "cat /data/late/late-marker").stdout,
        "late-marker",
        "HOST_TO_CONTAINER: a later host mount under the volume shows inside"
    );
    let seen = cri.sh(&private, "ls -A /data/late");
    assert_eq!(
        (seen.code, seen.stdout.as_str()),
        (0, ""),
        "PRIVATE: the later host mount does not show inside (the dir stays empty): {seen:?}"
    );
    // BIDIRECTIONAL receives as well.
    mount_late(&shared, "shared-marker");
    assert_eq!(
        cri.sh(&bidi, "cat /shared/late/shared-marker").stdout,
        "shared-marker",
        "BIDIRECTIONAL: a later host mount under the volume shows inside"
    );

    // A mount made inside the privileged BIDIRECTIONAL container shows on the host.
    cri.sh_ok(&bidi, "mkdir -p /shared/inner && mount -t tmpfs tmpfs /shared/inner && echo hi >/shared/inner/from-container");
    let inner = shared.join("inner");
    assert!(is_mount_point(&inner), "BIDIRECTIONAL: the container's mount at {} reached the host", inner.display());
    assert_eq!(std::fs::read_to_string(inner.join("from-container")).unwrap(), "hi\n");
    // ... but one made outside the volume does not.
    cri.sh_ok(&bidi, "mkdir -p /outside && mount -t tmpfs tmpfs /outside");
    assert!(rustpod_tests::leftovers::mount_points_under("/outside").is_empty(), "a mount outside the volume stays in the container");

    // The single-file mount.
    cri.sh_ok(&h2c, "echo bye >/dev/termination-log");
    assert_eq!(std::fs::read_to_string(&term_log).unwrap(), "bye\n", "the file bind writes through to the host file");
    drop(cri);
}

#[test]
fn a_host_path_that_cannot_exist_fails_create_container() {
    let cri = cri_or_skip!();
    let pod_cfg = pod_config("missing");
    let pod = cri.run_pod_ok(&pod_cfg);
    // Under a regular file: containerd cannot create it (it creates plain missing dirs).
    let file = cri.dir().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let missing = file.join("volume");
    let mut c = sleeper("c");
    c.mounts = vec![mount(&missing, "/data", MountPropagation::PropagationPrivate)];
    let err = match cri.create_container(&pod, &c, &pod_cfg) {
        Err(e) => e.message().to_string(),
        Ok(id) => cri
            .start_container(&id)
            .err()
            .map(|e| e.message().to_string())
            .unwrap_or_else(|| panic!("a container with host path {} started", missing.display())),
    };
    assert!(err.contains(missing.to_str().unwrap()) || err.contains(file.to_str().unwrap()), "the error names the host path: {err}");
    // The pod is unharmed.
    let ok = cri.run_container(&pod, &sleeper("ok"), &pod_cfg);
    assert_eq!(cri.sh_ok(&ok, "echo alive"), "alive");
}

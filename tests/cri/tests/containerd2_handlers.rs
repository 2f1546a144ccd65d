// containerd 2.x's CRI plugin (`RUSTPOD_CRI_CONTAINERD`, else `RUSTPOD_CONTAINERD`, which
// hack/test.sh sets to sid's 2.1.9):
// the handler features it tells kubelet in `Status` (recursive read-only mounts, user
// namespaces), which it learns from the shim's `-info`. containerd 2.1 asks only handlers of
// type io.containerd.runc.v2: the runc handler's features are `runc features`'; the rustpod
// handler (io.containerd.rustpod.v1) gets none, whatever the shim answers. (A runc-typed
// handler with runtime_path our shim gets ours: user_namespaces.rs.)

use rustpod_cri_tests::cri::RuntimeHandler;
use rustpod_cri_tests::{blocker_on, containerd2, Cri};
use rustpod_tests::{env, process, skip, skip_if};

fn handler<'a>(handlers: &'a [RuntimeHandler], name: &str) -> &'a RuntimeHandler {
    handlers.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no handler {name:?} in {handlers:#?}"))
}

#[test]
fn containerd2_reports_handler_features_learnt_from_info() {
    let Some(containerd) = containerd2() else {
        skip!("neither RUSTPOD_CRI_CONTAINERD nor RUSTPOD_CONTAINERD is set (a containerd 2.x binary; hack/test.sh sets sid's)");
    };
    skip_if!(blocker_on(Some(&containerd)));
    let cri = Cri::start_on(Some(&containerd));
    let version = cri.version().expect("CRI Version").runtime_version;
    assert!(version.starts_with('2'), "RUSTPOD_CRI_CONTAINERD runs containerd {version}, not 2.x");
    let handlers = cri.runtime_status().expect("CRI Status").runtime_handlers;

    let runc_features = process::run(&env::runc_bin(), &["features"], b"").ok().stdout_json();
    let runc_has_rro = runc_features["mountOptions"].as_array().is_some_and(|o| o.iter().any(|m| m == "rro"));
    let runc = handler(&handlers, "runc").features.expect("containerd introspects the runc handler");
    assert_eq!(runc.recursive_read_only_mounts, runc_has_rro, "{handlers:#?}");
    // runc 1.1.5 has no idmapped mounts; 1.3.6 has them (`mountExtensions.idmap.enabled`).
    let runc_idmap = runc_features["linux"]["mountExtensions"]["idmap"]["enabled"] == true;
    assert_eq!(
        runc.user_namespaces,
        runc_idmap,
        "runc {} features says idmap enabled: {runc_idmap}: {handlers:#?}",
        env::runc_bin().display()
    );

    let rustpod = handler(&handlers, "rustpod");
    if version.starts_with("2.1.") {
        assert_eq!(rustpod.features, None, "containerd 2.1 introspects only io.containerd.runc.v2 handlers: {handlers:#?}");
    } else {
        // What `-info` tells: rro is claimed, and idmapped mounts where this kernel makes them
        // (mounts_idmap.rs proves them; `rustpod features` says which).
        let features = rustpod.features.expect("containerd introspects the rustpod handler");
        let ours = process::run(&env::rustpod_bin(), &["features"], b"").ok().stdout_json();
        let idmap = ours["linux"]["mountExtensions"]["idmap"]["enabled"] == true;
        assert!(features.recursive_read_only_mounts, "{handlers:#?}");
        assert_eq!(features.user_namespaces, idmap, "{handlers:#?}");
    }
}

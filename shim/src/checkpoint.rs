//! The task service's `Checkpoint`: containerd's request and its runc
//! `CheckpointOptions` as the library's checkpoint options, as containerd's
//! runc shim reads them (the image path is the request's; without a work
//! path criu works in the image path). And what a `Create` with a
//! checkpoint restores from, which its `Start` restores.

use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim::oci::CheckpointOptions as RuncCheckpointOptions;

use crate::error::Error;
use crate::runtime_options::RuntimeOptions;

/// A checkpoint a Create asks to restore: the images containerd unpacked,
/// and where criu works (runc's `CriuWorkPath`, else `<bundle>/work`, as
/// containerd's runc shim picks it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Restore {
    pub image_path: std::path::PathBuf,
    pub work_path: std::path::PathBuf,
}

/// The restore a Create asks for, if any: the request's checkpoint, else runc's
/// `CriuImagePath` (which containerd's task service hands over as the checkpoint; a client
/// that talks to the shim itself may not). A parent checkpoint is refused: restore takes none
/// (runc's `restore` has no `--parent-path` either).
pub fn restore_of(req: &containerd_shim::api::CreateTaskRequest, options: &RuntimeOptions) -> Result<Option<Restore>, Error> {
    let image_path = match (req.checkpoint.as_str(), options.criu_image_path.as_deref()) {
        ("", None) => return Ok(None),
        ("", Some(path)) | (path, _) => path,
    };
    if !req.parent_checkpoint.is_empty() {
        return Err(Error::Unimplemented(format!(
            "create {}: restore with parent checkpoint {}: not supported",
            req.id, req.parent_checkpoint
        )));
    }
    let work_path = options.criu_work_path.as_ref().map_or_else(|| std::path::Path::new(&req.bundle).join("work"), Into::into);
    Ok(Some(Restore { image_path: image_path.into(), work_path }))
}

/// The library's options for checkpointing to `path` with containerd's
/// `options`; what we cannot honour is refused, naming it.
pub fn options(path: &str, options: &MessageField<Any>) -> Result<rustpod::CheckpointOptions, Error> {
    let runc = match options.as_ref() {
        None => RuncCheckpointOptions::default(),
        Some(any) if any.type_url.ends_with("containerd.runc.v1.CheckpointOptions") => {
            RuncCheckpointOptions::parse_from_bytes(&any.value).map_err(|e| Error::InvalidArgument(format!("checkpoint options: {e}")))?
        }
        Some(any) => return Err(Error::InvalidArgument(format!("checkpoint options of type {}", any.type_url))),
    };
    if !runc.empty_namespaces.is_empty() {
        return Err(Error::Unimplemented(format!("checkpoint with empty namespaces {:?}", runc.empty_namespaces)));
    }
    let image_path = if runc.image_path.is_empty() { path } else { runc.image_path.as_str() };
    if image_path.is_empty() {
        return Err(Error::InvalidArgument("checkpoint: no image path".into()));
    }
    Ok(rustpod::CheckpointOptions {
        criu: rustpod::criu::CriuOptions {
            criu_path: "criu".into(),
            image_path: image_path.into(),
            work_path: (!runc.work_path.is_empty()).then(|| runc.work_path.clone().into()),
            tcp_established: runc.open_tcp,
            ext_unix_sk: runc.external_unix_sockets,
            // A terminal is criu's shell job, as the runc shim passes it.
            shell_job: runc.terminal,
            file_locks: runc.file_locks,
            manage_cgroups_mode: (!runc.cgroups_mode.is_empty()).then(|| runc.cgroups_mode.clone()),
            lazy_pages: false,
        },
        leave_running: !runc.exit,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(opts: &RuncCheckpointOptions) -> MessageField<Any> {
        MessageField::some(Any {
            type_url: "type.googleapis.com/containerd.runc.v1.CheckpointOptions".into(),
            value: opts.write_to_bytes().expect("encode"),
            ..Default::default()
        })
    }

    #[test]
    fn exit_ends_the_container_and_the_options_image_path_wins() {
        let runc = RuncCheckpointOptions {
            exit: true,
            image_path: "/img".into(),
            work_path: "/work".into(),
            terminal: true,
            ..Default::default()
        };
        let opts = options("/from-request", &any(&runc)).expect("accepted");
        assert!(!opts.leave_running);
        assert_eq!(opts.criu.image_path, std::path::Path::new("/img"));
        assert_eq!(opts.criu.work_path.as_deref(), Some(std::path::Path::new("/work")));
        assert!(opts.criu.shell_job, "a terminal is criu's shell job, as in the runc shim");
    }

    #[test]
    fn no_options_leave_it_running_in_the_requests_path() {
        let opts = options("/from-request", &MessageField::none()).expect("accepted");
        assert!(opts.leave_running);
        assert_eq!(opts.criu.image_path, std::path::Path::new("/from-request"));
    }

    #[test]
    fn a_create_restores_its_checkpoint_with_criu_working_in_the_bundle() {
        let none = RuntimeOptions::default();
        let mut req = containerd_shim::api::CreateTaskRequest { id: "c".into(), bundle: "/b".into(), ..Default::default() };
        assert!(restore_of(&req, &none).expect("no checkpoint").is_none());
        req.checkpoint = "/var/lib/containerd/tmp/cp".into();
        let restore = restore_of(&req, &none).expect("accepted").expect("a restore");
        assert_eq!(restore.image_path, std::path::Path::new("/var/lib/containerd/tmp/cp"));
        assert_eq!(restore.work_path, std::path::Path::new("/b/work"));
        req.parent_checkpoint = "/p".into();
        assert!(matches!(restore_of(&req, &none), Err(Error::Unimplemented(_))));
    }

    #[test]
    fn runcs_criu_paths_name_the_images_and_where_criu_works() {
        let options = RuntimeOptions { criu_image_path: Some("/images".into()), criu_work_path: Some("/w".into()), ..Default::default() };
        let mut req = containerd_shim::api::CreateTaskRequest { id: "c".into(), bundle: "/b".into(), ..Default::default() };
        let restore = restore_of(&req, &options).expect("accepted").expect("a restore from CriuImagePath");
        assert_eq!(
            (restore.image_path.as_path(), restore.work_path.as_path()),
            (std::path::Path::new("/images"), std::path::Path::new("/w"))
        );
        // containerd's own checkpoint (it is CriuImagePath when containerd read that) wins.
        req.checkpoint = "/cp".into();
        let restore = restore_of(&req, &options).expect("accepted").expect("a restore");
        assert_eq!(restore.image_path, std::path::Path::new("/cp"));
    }

    #[test]
    fn empty_namespaces_and_other_option_types_are_refused() {
        let runc = RuncCheckpointOptions { empty_namespaces: vec!["network".into()], ..Default::default() };
        assert!(matches!(options("/p", &any(&runc)), Err(Error::Unimplemented(_))));
        let other = MessageField::some(Any { type_url: "x.Other".into(), ..Default::default() });
        assert!(matches!(options("/p", &other), Err(Error::InvalidArgument(_))));
    }
}

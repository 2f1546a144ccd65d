//! `linux.netDevices` (runtime-spec 1.3) without an intermediate process:
//! `create` moves each host link into the init's network namespace (made
//! by the clone, or the one the spec names) under its new name, down, and
//! passes its permanent global addresses on the engine's channel; the init,
//! first thing after its namespaces, puts them back on the moved link and
//! brings it up, as the engine's init does. The netlink steps are the
//! engine's public ones.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use libcontainer::network::address::AddressClient;
use libcontainer::network::cidr::CidrAddress;
use libcontainer::network::link::LinkClient;
use libcontainer::network::network_device::{dev_change_net_namespace, resolve_device_name, setup_addresses_in_network_namespace};
use libcontainer::network::wrapper::create_network_client;
use oci_spec::runtime::{LinuxNamespaceType, LinuxNetDevice, Spec};

/// Why a device was not moved in or set up: the device, the step, and
/// the engine's words.
#[derive(Debug, thiserror::Error)]
pub enum NetDeviceError {
    #[error("linux.netDevices: open the network namespace {}: {errno}", path.display())]
    Namespace { path: PathBuf, errno: nix::errno::Errno },
    #[error("linux.netDevices[{name:?}]: {step}: {words}")]
    Device { name: String, step: &'static str, words: String },
}

/// The spec's network devices; None when it lists none.
pub fn listed(spec: &Spec) -> Option<&HashMap<String, LinuxNetDevice>> {
    spec.linux().as_ref()?.net_devices().as_ref().filter(|d| !d.is_empty())
}

/// In `create`: moves each of `devices` into the network namespace of the
/// init `pid` (or the spec's, by path), and returns the addresses each had.
pub fn move_in(
    spec: &Spec,
    devices: &HashMap<String, LinuxNetDevice>,
    pid: i32,
) -> Result<HashMap<String, Vec<CidrAddress>>, NetDeviceError> {
    let named = spec.linux().as_ref().and_then(|l| l.namespaces().as_ref()).into_iter().flatten();
    let path = named
        .filter(|ns| ns.typ() == LinuxNamespaceType::Network)
        .find_map(|ns| ns.path().clone())
        .unwrap_or_else(|| PathBuf::from(format!("/proc/{pid}/ns/net")));
    let netns = std::fs::File::open(&path)
        .map_err(|e| NetDeviceError::Namespace { path: path.clone(), errno: crate::sys::io_errno::errno_of(&e) })?;
    devices
        .iter()
        .map(|(name, device)| {
            let addrs = dev_change_net_namespace(name, netns.as_raw_fd(), device).map_err(|e| NetDeviceError::Device {
                name: name.clone(),
                step: "moving it into the container's network namespace",
                words: e.to_string(),
            })?;
            Ok((name.clone(), addrs))
        })
        .collect()
}

/// In the init, in its network namespace: each moved device's addresses
/// back on it, then the device up.
pub fn set_up(devices: &HashMap<String, LinuxNetDevice>, addrs: &HashMap<String, Vec<CidrAddress>>) -> Result<(), NetDeviceError> {
    for (name, device) in devices {
        let new_name = resolve_device_name(device, name);
        let fail = |step: &'static str| {
            move |e: libcontainer::network::NetworkError| NetDeviceError::Device { name: name.clone(), step, words: e.to_string() }
        };
        let mut links = LinkClient::new(create_network_client()).map_err(fail("a netlink socket"))?;
        let index = links.get_by_name(new_name).map_err(fail("finding it in the container"))?.header.index;
        if let Some(addrs) = addrs.get(name) {
            let mut addresses = AddressClient::new(create_network_client()).map_err(fail("a netlink socket"))?;
            setup_addresses_in_network_namespace(addrs, index, new_name, &mut addresses).map_err(fail("its addresses"))?;
        }
        links.set_up(index).map_err(fail("bringing it up"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_without_devices_lists_none_and_a_missing_namespace_is_named() {
        let spec: Spec = serde_json::from_value(serde_json::json!({"ociVersion": "1.3.0", "linux": {"netDevices": {}}})).unwrap();
        assert!(listed(&spec).is_none());
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.3.0",
            "linux": {"netDevices": {"dummy0": {"name": "eth7"}}, "namespaces": [{"type": "network", "path": "/nonexistent/netns"}]}
        }))
        .unwrap();
        let devices = listed(&spec).unwrap();
        let err = move_in(&spec, devices, 1).unwrap_err();
        assert_eq!(err.to_string(), "linux.netDevices: open the network namespace /nonexistent/netns: ENOENT: No such file or directory");
    }
}

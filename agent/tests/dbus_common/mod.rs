//! Shared by the D-Bus tests on the host and in the lab VM: the pinned `scxctl`, and bus
//! configurations for a private `dbus-daemon`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The scxctl version the tests drive: `[workspace.metadata.asa.tools] scxctl` in the
/// workspace's Cargo.toml (lab/setup.sh installs the same one).
pub fn scxctl_version() -> String {
    let manifest: toml::Value = toml::from_str(include_str!("../../../Cargo.toml")).unwrap();
    manifest["workspace"]["metadata"]["asa"]["tools"]["scxctl"]
        .as_str()
        .expect("Cargo.toml pins scxctl")
        .to_owned()
}

/// Where lab/setup.sh installs scxctl: `<project cache>/scxctl/scxctl-<version>/bin/scxctl`.
pub fn scxctl_path() -> PathBuf {
    asa_experts::cache_dir()
        .join("scxctl")
        .join(format!("scxctl-{}", scxctl_version()))
        .join("bin/scxctl")
}

/// The installed scxctl, or None with the reason printed (the only case a test skips).
pub fn scxctl() -> Option<PathBuf> {
    let path = scxctl_path();
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: scxctl {} is not installed at {} (lab/setup.sh installs it)",
            scxctl_version(),
            path.display()
        );
        None
    }
}

/// A bus configuration that listens on `socket` and lets anyone own any name and send
/// anything (a private test bus).
pub fn open_bus_config(socket: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
</busconfig>
"#,
        socket.display()
    )
}

/// A bus configuration with the system bus's default rules (Debian's system.conf: nobody owns
/// a name or sends a method call unless a service's policy allows it) and the policy file
/// `policy` included, listening on `socket`.
pub fn system_bus_config(socket: &Path, policy: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <include>{}</include>
</busconfig>
"#,
        socket.display(),
        policy.display()
    )
}

/// The shipped bus policy (agent/dist/org.scx.Loader.conf).
pub fn shipped_policy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/org.scx.Loader.conf")
}

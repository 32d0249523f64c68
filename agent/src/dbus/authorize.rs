//! Who may change the scheduler over D-Bus: the same rule as scx_loader's, whose bus policy
//! lets anyone send the switching methods and leaves the decision to polkit's
//! `org.scx.loader.manage-schedulers` action (by default: an active local session's user
//! after admin authentication).
//!
//! Invariant: a call that changes the scheduler runs only when its sender is root, is the
//! agent's own user (as on the control socket), or polkit says yes; when polkit cannot be
//! asked (not installed, the action not registered), everyone else is refused.

use std::collections::HashMap;

use zbus::message::Header;
use zbus::zvariant::Value;

/// scx_loader's polkit action: an administrator's rules for scx_loader apply to ASA as they
/// are (agent/dist/org.scx.Loader.policy declares it when scx_loader's policy is not
/// installed).
pub const ACTION_ID: &str = "org.scx.loader.manage-schedulers";

/// polkit's `CheckAuthorizationFlags::AllowUserInteraction`: polkit may ask the user to
/// authenticate (through their session's agent), as it does for scx_loader.
const ALLOW_USER_INTERACTION: u32 = 1;

/// Ok when the sender of the call in `header` may change the scheduler; else an
/// `AccessDenied` error saying why.
pub async fn authorize(
    connection: &zbus::Connection,
    header: &Header<'_>,
) -> zbus::fdo::Result<()> {
    let sender = header
        .sender()
        .ok_or_else(|| zbus::fdo::Error::AccessDenied("a call without a sender".into()))?
        .to_owned();
    let bus = zbus::fdo::DBusProxy::new(connection).await?;
    let uid = bus
        .get_connection_unix_user(sender.clone().into())
        .await
        .map_err(|e| {
            zbus::fdo::Error::AccessDenied(format!("cannot tell who sent the call: {e}"))
        })?;
    if uid == 0 || uid == nix::unistd::geteuid().as_raw() {
        return Ok(());
    }
    match ask_polkit(connection, sender.as_str()).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(zbus::fdo::Error::AccessDenied(format!(
            "uid {uid} is not authorized to manage sched_ext schedulers (polkit action {ACTION_ID})"
        ))),
        Err(e) => Err(zbus::fdo::Error::AccessDenied(format!(
            "uid {uid} is neither root nor the agent's user, and polkit could not be asked ({e}): only root may change the scheduler"
        ))),
    }
}

/// polkit's answer for `sender` (a unique bus name) and [`ACTION_ID`].
async fn ask_polkit(connection: &zbus::Connection, sender: &str) -> zbus::Result<bool> {
    let subject = (
        "system-bus-name",
        HashMap::from([("name", Value::from(sender))]),
    );
    let details: HashMap<&str, &str> = HashMap::new();
    let reply = connection
        .call_method(
            Some("org.freedesktop.PolicyKit1"),
            "/org/freedesktop/PolicyKit1/Authority",
            Some("org.freedesktop.PolicyKit1.Authority"),
            "CheckAuthorization",
            &(subject, ACTION_ID, details, ALLOW_USER_INTERACTION, ""),
        )
        .await?;
    let (authorized, _challenge, _details): (bool, bool, HashMap<String, String>) =
        reply.body().deserialize()?;
    Ok(authorized)
}

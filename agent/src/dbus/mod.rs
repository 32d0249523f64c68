//! scx_loader's D-Bus interface, served by ASA: the name `org.scx.Loader` on the system bus,
//! the object `/org/scx/Loader`, the interface `org.scx.Loader` with scx_loader's methods and
//! properties, so `scxctl` and desktop tools written for scx_loader drive the agent
//! (`asa run --dbus`, or `asa dbus` beside a running agent).
//!
//! - [`names`]: scx_loader's scheduler names and modes in the catalogue's terms;
//! - [`interface`]: the interface object, one control request per call;
//! - [`authorize`]: root, the agent's user, or polkit's `org.scx.loader.manage-schedulers`;
//! - [`agent_interface`]: `org.asa.Agent1` on the same object, what scx_loader has no word for
//!   (whole-machine or per-application mode, the applications known).
//!
//! Invariant: the interface knows no state of its own; every call is a control request
//! ([`Request`]) answered by the agent that `asa status` asks too, so both always agree. The
//! name is requested without queueing and without taking it from an owner: when scx_loader
//! (or another agent) has it, serving fails with a message that says who has it.
//!
//! Signals: scx_loader declares none of its own and emits no `PropertiesChanged`; ASA emits it
//! for CurrentScheduler and DefaultScheduler within [`WATCH_INTERVAL`] of a change (whoever
//! made it: the agent, `asa pin`, a D-Bus call), so a client that caches properties (zbus
//! proxies do) sees switches; likewise for every `org.asa.Agent1` property. The other
//! properties never change and are declared `const`.

pub mod agent_interface;
pub mod authorize;
pub mod interface;
pub mod names;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_experts::Catalogue;
use zbus::fdo::{RequestNameFlags, RequestNameReply};

use crate::control::Request;
use crate::stop::Stop;
use agent_interface::AgentFace;

/// The well-known bus name scx_loader owns.
pub const BUS_NAME: &str = "org.scx.Loader";
/// The object path of the interface.
pub const OBJECT_PATH: &str = "/org/scx/Loader";
/// How often the agent's state is compared with the last CurrentScheduler and DefaultScheduler
/// sent, to emit `PropertiesChanged`.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// The system bus when `DBUS_SYSTEM_BUS_ADDRESS` is not set.
pub const DEFAULT_SYSTEM_BUS: &str = "unix:path=/var/run/dbus/system_bus_socket";

/// The agent behind the interface: [`AgentLink`] (shared with the control socket), replaceable
/// while serving, so the name can be taken at start-up (before the agent is ready) and the same
/// service then answers for the running agent.
pub use crate::control::{AgentLink, Answer};

/// Which bus to serve on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bus {
    /// The system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else [`DEFAULT_SYSTEM_BUS`]), as scx_loader.
    System,
    /// A bus at this D-Bus address (tests).
    Address(String),
}

impl Bus {
    fn describe(&self) -> String {
        match self {
            Bus::System => match std::env::var("DBUS_SYSTEM_BUS_ADDRESS") {
                Ok(a) if !a.is_empty() => {
                    format!("the system bus at {a} (DBUS_SYSTEM_BUS_ADDRESS)")
                }
                _ => format!("the system bus at {DEFAULT_SYSTEM_BUS}"),
            },
            Bus::Address(a) => format!("the bus at {a}"),
        }
    }
}

/// `org.scx.Loader` being served; dropping it stops the property watch, releases the name
/// and closes the connection.
pub struct Service {
    connection: zbus::blocking::Connection,
    stop: Stop,
    watch: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.request();
        if let Some(watch) = self.watch.take() {
            let _ = watch.join();
        }
        let _ = self.connection.release_name(BUS_NAME);
    }
}

impl Service {
    /// This connection's unique name on the bus.
    pub fn unique_name(&self) -> String {
        self.connection
            .unique_name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    }
}

/// Serve `org.scx.Loader` on `bus`, answered by `agent`, with the experts of `catalogue`.
/// Fails, with what to do, when the bus cannot be reached, when its policy does not let this
/// user own the name, or when another process owns it (scx_loader).
pub fn serve(agent: AgentLink, catalogue: Catalogue, bus: &Bus) -> Result<Service> {
    let builder = match bus {
        Bus::System => zbus::blocking::connection::Builder::system(),
        Bus::Address(address) => zbus::blocking::connection::Builder::address(address.as_str()),
    };
    let loader = interface::Loader::new(agent.clone(), catalogue.clone());
    let face = agent_interface::Agent::new(agent.clone());
    let connection = builder
        .and_then(|b| b.serve_at(OBJECT_PATH, loader))
        .and_then(|b| b.serve_at(OBJECT_PATH, face))
        .and_then(|b| b.build())
        .with_context(|| {
            format!(
                "cannot connect to {} to serve {BUS_NAME}: is dbus-daemon running?",
                bus.describe()
            )
        })?;
    let reply = connection.request_name_with_flags(BUS_NAME, RequestNameFlags::DoNotQueue.into());
    match reply {
        Ok(RequestNameReply::PrimaryOwner | RequestNameReply::AlreadyOwner) => {}
        Ok(RequestNameReply::Exists | RequestNameReply::InQueue) | Err(zbus::Error::NameTaken) => {
            bail!(
                "{BUS_NAME} is already owned on {} by {}: stop it first (scx_loader: `systemctl disable --now scx_loader`)",
                bus.describe(),
                owner(&connection)
            )
        }
        Err(e) if e.to_string().contains("AccessDenied") => bail!(
            "the bus policy does not let uid {} own {BUS_NAME} on {} ({e}): install agent/dist/org.scx.Loader.conf as /usr/share/dbus-1/system.d/org.scx.Loader.conf (it lets root own the name) and run the agent as root",
            nix::unistd::geteuid(),
            bus.describe()
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("requesting {BUS_NAME} on {}", bus.describe()))
        }
    }
    log::info!(
        "serving {BUS_NAME} at {OBJECT_PATH} on {} (scxctl and scx_loader's clients drive the agent)",
        bus.describe()
    );
    let stop = Stop::new();
    let watch = {
        let (connection, stop) = (connection.clone(), stop.clone());
        std::thread::Builder::new()
            .name("dbus-watch".into())
            .spawn(move || watch(&connection, &agent, &catalogue, &stop))
            .context("spawning the D-Bus property watch")?
    };
    Ok(Service {
        connection,
        stop,
        watch: Some(watch),
    })
}

/// Every [`WATCH_INTERVAL`] until `stop`: the agent's CurrentScheduler and DefaultScheduler
/// and its [`AgentFace`](agent_interface::AgentFace), and `PropertiesChanged` for each
/// property that differs from the last seen.
fn watch(
    connection: &zbus::blocking::Connection,
    agent: &AgentLink,
    catalogue: &Catalogue,
    stop: &Stop,
) {
    let mut last: Option<((String, String), AgentFace)> = None;
    // The first reading at once: a change in the first interval is signalled too.
    loop {
        if let Some(status) = agent.ask(Request::Status).status {
            let now = (
                names::current_scheduler(catalogue, &status),
                names::default_scheduler(catalogue, &status),
            );
            let face = AgentFace::of(&status);
            if let Some((before, face_before)) = &last {
                if let Err(e) = emit_changes(connection, before, &now) {
                    log::debug!("emitting PropertiesChanged: {e}");
                }
                if let Err(e) = emit_face_changes(connection, face_before, &face) {
                    log::debug!("emitting org.asa.Agent1 PropertiesChanged: {e}");
                }
            }
            last = Some((now, face));
        }
        if stop.wait_until(std::time::Instant::now() + WATCH_INTERVAL) {
            return;
        }
    }
}

/// `PropertiesChanged` on `org.asa.Agent1` for each property that differs.
fn emit_face_changes(
    connection: &zbus::blocking::Connection,
    before: &AgentFace,
    now: &AgentFace,
) -> zbus::Result<()> {
    if before == now {
        return Ok(());
    }
    let iface = connection
        .object_server()
        .interface::<_, agent_interface::Agent>(OBJECT_PATH)?;
    let face = iface.get();
    let emitter = iface.signal_emitter();
    if before.mode != now.mode {
        log::debug!("Mode {} -> {}", before.mode, now.mode);
        zbus::block_on(face.mode_changed(emitter))?;
    }
    if before.expert != now.expert {
        zbus::block_on(face.expert_changed(emitter))?;
    }
    if before.applications != now.applications {
        zbus::block_on(face.applications_changed(emitter))?;
    }
    if before.classified != now.classified {
        zbus::block_on(face.classified_changed(emitter))?;
    }
    if before.pins != now.pins {
        zbus::block_on(face.pins_changed(emitter))?;
    }
    if before.app_model != now.app_model {
        zbus::block_on(face.app_model_changed(emitter))?;
    }
    Ok(())
}

fn emit_changes(
    connection: &zbus::blocking::Connection,
    before: &(String, String),
    now: &(String, String),
) -> zbus::Result<()> {
    if before == now {
        return Ok(());
    }
    let iface = connection
        .object_server()
        .interface::<_, interface::Loader>(OBJECT_PATH)?;
    let loader = iface.get();
    let emitter = iface.signal_emitter();
    if before.0 != now.0 {
        log::debug!("CurrentScheduler {} -> {}", before.0, now.0);
        zbus::block_on(loader.current_scheduler_changed(emitter))?;
    }
    if before.1 != now.1 {
        zbus::block_on(loader.default_scheduler_changed(emitter))?;
    }
    Ok(())
}

/// Who owns [`BUS_NAME`]: "pid N (command)" when the bus says, else "another process".
fn owner(connection: &zbus::blocking::Connection) -> String {
    let pid = zbus::blocking::fdo::DBusProxy::new(connection).and_then(|bus| {
        let name = zbus::names::BusName::try_from(BUS_NAME).map_err(zbus::Error::from)?;
        Ok(bus.get_connection_unix_process_id(name)?)
    });
    match pid {
        Ok(pid) => {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_owned())
                .unwrap_or_else(|_| "?".into());
            format!("pid {pid} ({comm})")
        }
        Err(_) => "another process".into(),
    }
}

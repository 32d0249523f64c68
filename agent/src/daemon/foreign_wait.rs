//! Another tool's scheduler at start: `asa run` waits for it to go (or asks its owner to stop,
//! `--take-over`), answering `asa status` meanwhile, and only then builds its supervisor. The
//! mechanics (looking, waiting, signalling) are [`crate::action::foreign`]'s; this is the
//! daemon's side: its links, its heartbeat, systemd's status line.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::Result;
use asa_experts::supervisor::unix_ms;
use asa_experts::{Active, SchedExt, Supervisor, EEVDF};

use super::control_socket::status_only;
use super::heartbeat::Heartbeat;
use super::settings::RunSettings;
use super::DaemonContext;
use crate::action::foreign;
use crate::control::{self, AgentLink, AgentStatus};
use crate::sd_notify;
use crate::stop::Stop;

/// The supervisor, once no other tool's scheduler is attached: each time one is, waits for it
/// ([`wait_for_foreign_scheduler`]) and looks again. None when `stop` came during a wait.
pub(super) fn supervisor_once_free(
    scx: &SchedExt,
    ctx: &DaemonContext,
    settings: &RunSettings,
    stop: &Stop,
    heartbeat: &Heartbeat,
    links: &[&AgentLink],
) -> Result<Option<Supervisor>> {
    loop {
        // Another tool's scheduler: wait for it to go (or ask it to, --take-over), answering
        // `asa status` meanwhile, rather than fail and be restarted by systemd forever.
        let waited = wait_for_foreign_scheduler(scx, settings, stop.flag(), heartbeat, links)?;
        if waited == foreign::Waited::Stopped {
            return Ok(None);
        }
        match Supervisor::new(ctx.catalogue.clone(), scx.clone(), ctx.supervisor) {
            Ok(s) => return Ok(Some(s)),
            // A foreign scheduler attached between the look and the supervisor's: wait again.
            Err(e) if matches!(foreign::attached(scx), Ok(Some(_))) => {
                log::warn!("{e:#}");
            }
            Err(e) => return Err(e),
        }
    }
}

/// Before the supervisor: when another tool's scheduler is attached, answer `asa status` (mode
/// `waiting`) and refuse pins on `links` (the control socket's, D-Bus's) while
/// [`foreign::wait_until_gone`] waits (with `--take-over`, after asking its owner to stop). See
/// [`foreign`].
fn wait_for_foreign_scheduler(
    scx: &SchedExt,
    settings: &RunSettings,
    stop: &AtomicBool,
    heartbeat: &Heartbeat,
    links: &[&AgentLink],
) -> Result<foreign::Waited> {
    if foreign::attached(scx)?.is_none() {
        return Ok(foreign::Waited::NotNeeded);
    }
    let status = Arc::new(Mutex::new(AgentStatus::new(
        "waiting",
        Active {
            expert: EEVDF.to_string(),
            since_unix_ms: unix_ms(SystemTime::now()),
            pid: None,
        },
        "",
    )));
    let waiting = |st: &AgentStatus| {
        format!(
            "the agent is waiting for another tool's scheduler to detach ({}): it switches nothing until then",
            st.note
        )
    };
    for link in links {
        link.set(status_only(status.clone(), scx.clone(), waiting));
    }
    let since = unix_ms(SystemTime::now());
    let take_over = || foreign::take_over(Path::new("/proc"), foreign::sigint);
    foreign::wait_until_gone(
        scx,
        foreign::POLL,
        settings
            .take_over
            .then_some(&take_over as &dyn Fn() -> foreign::TakeOver),
        stop,
        |snap, taken| {
            let what = foreign::describe(snap);
            let mut st = status.lock().unwrap();
            st.note = match taken {
                Some(t) => format!("{what} is attached, not started by ASA; --take-over: {t}; the agent takes control once it has gone"),
                None => format!("{what} is attached, not started by ASA; the agent waits for it to go and then takes control (`asa run --take-over` asks its owner to stop)"),
            };
            st.last_event = Some(control::TimedEvent {
                at_unix_ms: since,
                message: format!("foreign scheduler {what} attached at start"),
            });
            sd_notify::notify_or_log(&format!(
                "STATUS=waiting for the foreign scheduler {what} to go"
            ));
        },
        || heartbeat.beat(),
    )
}

//! The `org.scx.Loader` interface object: scx_loader's methods and properties, each answered
//! by one request to the agent (the control requests `asa pin`, `asa unpin` and `asa status`
//! send), so D-Bus and `asa status` always tell the same state.
//!
//! Invariant: no method changes the scheduler except through the agent's controller, and
//! only after [`authorize`](super::authorize::authorize) said yes; every request runs on a
//! blocking-pool thread, so a switch that takes seconds never holds up another caller's
//! property read.

use asa_experts::{Catalogue, EEVDF};
use zbus::message::Header;

use super::names;
use super::AgentLink;
use crate::control::{AgentStatus, Request, Response};

/// The object served at [`OBJECT_PATH`](super::OBJECT_PATH).
pub struct Loader {
    agent: AgentLink,
    catalogue: Catalogue,
}

impl Loader {
    /// An interface object answering from `agent`, naming experts from `catalogue`.
    pub fn new(agent: AgentLink, catalogue: Catalogue) -> Self {
        Self { agent, catalogue }
    }

    async fn ask(&self, request: Request) -> Response {
        let agent = self.agent.clone();
        blocking::unblock(move || agent.ask(request)).await
    }

    async fn status(&self) -> zbus::fdo::Result<AgentStatus> {
        let response = self.ask(Request::Status).await;
        match (response.ok, response.status) {
            (true, Some(status)) => Ok(status),
            _ => Err(zbus::fdo::Error::Failed(
                response
                    .error
                    .unwrap_or_else(|| "the agent gave no status".into()),
            )),
        }
    }

    /// Authorize the caller, then send `request` (or refuse with its error) and wait for the
    /// agent's answer.
    async fn act(
        &self,
        connection: &zbus::Connection,
        header: &Header<'_>,
        method: &str,
        request: Result<Request, String>,
    ) -> zbus::fdo::Result<()> {
        let sender = header.sender().map(|s| s.to_string()).unwrap_or_default();
        if let Err(e) = super::authorize::authorize(connection, header).await {
            log::warn!("D-Bus {method} from {sender} refused: {e}");
            return Err(e);
        }
        let request = request.map_err(|why| {
            log::info!("D-Bus {method} from {sender} refused: {why}");
            zbus::fdo::Error::InvalidArgs(why)
        })?;
        log::info!("D-Bus {method} from {sender}: {request:?}");
        let response = self.ask(request).await;
        if response.ok {
            Ok(())
        } else {
            let why = response.error.unwrap_or_else(|| "the agent refused".into());
            log::warn!("D-Bus {method} from {sender} failed: {why}");
            Err(zbus::fdo::Error::Failed(why))
        }
    }

    fn require_supported(&self, scx_name: &str) -> zbus::fdo::Result<String> {
        match names::switch_request(&self.catalogue, scx_name, names::MODE_AUTO) {
            Ok(Request::Pin { expert }) => Ok(expert),
            Ok(_) => Err(zbus::fdo::Error::InvalidArgs(format!(
                "{scx_name:?} is the agent's own choice, not a scheduler with modes"
            ))),
            Err(why) => Err(zbus::fdo::Error::InvalidArgs(why)),
        }
    }
}

#[zbus::interface(name = "org.scx.Loader")]
impl Loader {
    /// The running scheduler's scx name (`scx_bpfland`); `unknown` on EEVDF.
    #[zbus(property)]
    async fn current_scheduler(&self) -> zbus::fdo::Result<String> {
        Ok(names::current_scheduler(
            &self.catalogue,
            &self.status().await?,
        ))
    }

    /// Always 0 (Auto): experts run with their catalogue arguments.
    #[zbus(property(emits_changed_signal = "const"))]
    async fn scheduler_mode(&self) -> u32 {
        names::MODE_AUTO
    }

    /// Always empty: experts never run with custom arguments.
    #[zbus(property(emits_changed_signal = "const"))]
    async fn current_scheduler_args(&self) -> Vec<String> {
        Vec::new()
    }

    /// The catalogue's available sched_ext experts, by scx name.
    #[zbus(property(emits_changed_signal = "const"))]
    async fn supported_schedulers(&self) -> Vec<String> {
        names::supported(&self.catalogue)
    }

    /// The mapping table's default expert (what `RestoreDefault`, i.e. the agent's own choice,
    /// runs when the agent is unsure); `unknown` without one.
    #[zbus(property)]
    async fn default_scheduler(&self) -> zbus::fdo::Result<String> {
        Ok(names::default_scheduler(
            &self.catalogue,
            &self.status().await?,
        ))
    }

    /// Always 0 (Auto).
    #[zbus(property(emits_changed_signal = "const"))]
    async fn default_mode(&self) -> u32 {
        names::MODE_AUTO
    }

    /// `asa pin` the expert (mode Auto only); `auto` hands the choice back to the agent.
    async fn start_scheduler(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
        scx_name: String,
        sched_mode: u32,
    ) -> zbus::fdo::Result<()> {
        let request = names::switch_request(&self.catalogue, &scx_name, sched_mode);
        self.act(connection, &header, "StartScheduler", request)
            .await
    }

    /// As StartScheduler; only an empty argument list is accepted.
    async fn start_scheduler_with_args(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
        scx_name: String,
        scx_args: Vec<String>,
    ) -> zbus::fdo::Result<()> {
        let request = names::switch_with_args_request(&self.catalogue, &scx_name, &scx_args);
        self.act(connection, &header, "StartSchedulerWithArgs", request)
            .await
    }

    /// `asa pin` the expert (mode Auto only); `auto` hands the choice back to the agent.
    async fn switch_scheduler(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
        scx_name: String,
        sched_mode: u32,
    ) -> zbus::fdo::Result<()> {
        let request = names::switch_request(&self.catalogue, &scx_name, sched_mode);
        self.act(connection, &header, "SwitchScheduler", request)
            .await
    }

    /// As SwitchScheduler; only an empty argument list is accepted.
    async fn switch_scheduler_with_args(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
        scx_name: String,
        scx_args: Vec<String>,
    ) -> zbus::fdo::Result<()> {
        let request = names::switch_with_args_request(&self.catalogue, &scx_name, &scx_args);
        self.act(connection, &header, "SwitchSchedulerWithArgs", request)
            .await
    }

    /// `asa pin eevdf`: the machine on EEVDF until another call or `asa unpin`.
    async fn stop_scheduler(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
    ) -> zbus::fdo::Result<()> {
        let request = Ok(Request::Pin {
            expert: EEVDF.to_owned(),
        });
        self.act(connection, &header, "StopScheduler", request)
            .await
    }

    /// `asa pin` of the running expert; an error on EEVDF.
    async fn restart_scheduler(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
    ) -> zbus::fdo::Result<()> {
        let status = self.status().await?;
        let request = names::restart_request(&status, EEVDF);
        self.act(connection, &header, "RestartScheduler", request)
            .await
    }

    /// `asa unpin`: the agent decides again.
    async fn restore_default(
        &self,
        #[zbus(connection)] connection: &zbus::Connection,
        #[zbus(header)] header: Header<'_>,
    ) -> zbus::fdo::Result<()> {
        self.act(connection, &header, "RestoreDefault", Ok(Request::Unpin))
            .await
    }

    /// The modes configured for the scheduler: Auto (0) only.
    async fn scheduler_modes(&self, scx_name: String) -> zbus::fdo::Result<Vec<u32>> {
        self.require_supported(&scx_name)?;
        Ok(vec![names::MODE_AUTO])
    }

    /// Each mode's arguments: Auto (0) with the expert's catalogue arguments.
    async fn scheduler_mode_args(
        &self,
        scx_name: String,
    ) -> zbus::fdo::Result<Vec<(u32, Vec<String>)>> {
        let expert = self.require_supported(&scx_name)?;
        let args = self
            .catalogue
            .get(&expert)
            .map(|e| e.args.clone())
            .unwrap_or_default();
        Ok(vec![(names::MODE_AUTO, args)])
    }
}

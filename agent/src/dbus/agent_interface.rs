//! `org.asa.Agent1`: what scx_loader's interface has no word for, served on the same object
//! (`/org/scx/Loader`) beside it — whether the agent runs one expert for the whole machine or
//! a layer per application class, and how many applications it knows. Read-only properties,
//! one status request each, so D-Bus and `asa status` always agree.
//!
//! Invariant: nothing here changes the agent's state; the values are
//! [`AgentFace::of`] the agent's [`AgentStatus`], a pure function tested without a bus.

use crate::control::{AgentStatus, Request};

use super::AgentLink;

/// The interface's name.
pub const INTERFACE: &str = "org.asa.Agent1";

/// The agent's mode and applications as the interface reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentFace {
    /// `whole_machine` (one expert for everything), `per_application` (a scheduler layer per
    /// application class) or `foreground` (a foreground `asa pin`: no decision engine).
    pub mode: String,
    /// The expert running, by catalogue name (`eevdf` included).
    pub expert: String,
    /// Applications seen at the agent's last walk (per-application mode only, else 0).
    pub applications: u32,
    /// Of those, with a class.
    pub classified: u32,
    /// Applications whose class the user pinned.
    pub pins: u32,
    /// The application model giving classes; empty with pins only.
    pub app_model: String,
}

impl AgentFace {
    /// The face of `status`.
    pub fn of(status: &AgentStatus) -> Self {
        let apps = status.decision.as_ref().and_then(|d| d.apps.as_ref());
        let mode = match (&status.decision, apps) {
            (None, _) => "foreground".to_owned(),
            (Some(_), Some(apps)) => apps.mode.clone(),
            (Some(_), None) => "whole_machine".to_owned(),
        };
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        AgentFace {
            mode,
            expert: status.active.expert.clone(),
            applications: apps.map_or(0, |a| count(a.applications)),
            classified: apps.map_or(0, |a| count(a.with_class)),
            pins: apps.map_or(0, |a| count(a.pins)),
            app_model: apps.and_then(|a| a.app_model.clone()).unwrap_or_default(),
        }
    }
}

/// The object serving [`INTERFACE`].
pub struct Agent {
    agent: AgentLink,
}

impl Agent {
    /// An interface object answering from `agent`.
    pub fn new(agent: AgentLink) -> Self {
        Self { agent }
    }

    async fn face(&self) -> zbus::fdo::Result<AgentFace> {
        let agent = self.agent.clone();
        let response = blocking::unblock(move || agent.ask(Request::Status)).await;
        match (response.ok, response.status) {
            (true, Some(status)) => Ok(AgentFace::of(&status)),
            _ => Err(zbus::fdo::Error::Failed(
                response
                    .error
                    .unwrap_or_else(|| "the agent gave no status".into()),
            )),
        }
    }
}

#[zbus::interface(name = "org.asa.Agent1")]
impl Agent {
    /// `whole_machine`, `per_application` or `foreground`.
    #[zbus(property)]
    async fn mode(&self) -> zbus::fdo::Result<String> {
        Ok(self.face().await?.mode)
    }

    /// The expert running, by catalogue name (`eevdf` included).
    #[zbus(property)]
    async fn expert(&self) -> zbus::fdo::Result<String> {
        Ok(self.face().await?.expert)
    }

    /// Applications seen at the last walk (0 outside per-application mode).
    #[zbus(property)]
    async fn applications(&self) -> zbus::fdo::Result<u32> {
        Ok(self.face().await?.applications)
    }

    /// Applications with a class.
    #[zbus(property)]
    async fn classified(&self) -> zbus::fdo::Result<u32> {
        Ok(self.face().await?.classified)
    }

    /// Applications whose class the user pinned.
    #[zbus(property)]
    async fn pins(&self) -> zbus::fdo::Result<u32> {
        Ok(self.face().await?.pins)
    }

    /// The application model giving classes; empty with pins only.
    #[zbus(property)]
    async fn app_model(&self) -> zbus::fdo::Result<String> {
        Ok(self.face().await?.app_model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{AppsStatus, DecisionStatus};
    use asa_experts::Active;

    fn status(decision: Option<DecisionStatus>) -> AgentStatus {
        let mut st = AgentStatus::new(
            "daemon",
            Active {
                expert: "layered".into(),
                since_unix_ms: 0,
                pid: Some(7),
            },
            "",
        );
        st.decision = decision;
        st
    }

    #[test]
    fn a_foreground_pin_has_no_decision_engine_and_says_so() {
        let face = AgentFace::of(&status(None));
        assert_eq!(face.mode, "foreground");
        assert_eq!(face.expert, "layered");
        assert_eq!((face.applications, face.classified, face.pins), (0, 0, 0));
    }

    #[test]
    fn a_daemon_without_application_status_is_whole_machine() {
        let face = AgentFace::of(&status(Some(DecisionStatus::new(Default::default()))));
        assert_eq!(face.mode, "whole_machine");
        assert_eq!(face.app_model, "");
    }

    #[test]
    fn per_application_mode_reports_its_applications_and_model() {
        let mut decision = DecisionStatus::new(Default::default());
        decision.apps = Some(AppsStatus {
            mode: "per_application".into(),
            expert: "layered".into(),
            applications: 12,
            with_class: 9,
            pins: 2,
            app_model: Some("/usr/share/asa/app-classifier.onnx".into()),
            ..Default::default()
        });
        let face = AgentFace::of(&status(Some(decision)));
        assert_eq!(face.mode, "per_application");
        assert_eq!((face.applications, face.classified, face.pins), (12, 9, 2));
        assert_eq!(face.app_model, "/usr/share/asa/app-classifier.onnx");
    }
}

//! The control socket from its bind to the end of `asa run`, and what it answers in each phase
//! before the controller takes over: while the agent starts ([`starting`]), and while it
//! switches nothing ([`status_only`]: a dry run, or a wait for another tool's scheduler).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::Result;
use asa_experts::supervisor::unix_ms;
use asa_experts::{Active, Catalogue, SchedExt};

use crate::control::{self, server, AgentLink, AgentStatus, Request, Response};

/// What `asa status` says while the agent loads what its decisions need.
pub const STARTING_NOTE: &str = "starting: loading the classifier model (ONNX Runtime, the model, the mapping table); nothing is switched until it is loaded";

/// What a pin or unpin is told meanwhile.
const STARTING_REFUSAL: &str =
    "the agent is starting (loading the classifier model): try again in a moment";

/// The control socket from its bind to the end of [`run`], however `run` ends (the socket file
/// is removed on drop). `link` answers it, and is replaced as the agent moves from starting to
/// waiting for a foreign scheduler to running.
pub(super) struct ControlSocket {
    path: PathBuf,
    /// What answers the socket now.
    pub(super) link: AgentLink,
}

impl ControlSocket {
    /// Binds `path` (refused while another agent serves it) and serves it, answered by `link`,
    /// with the bounds of [`server::serve`], for the life of the process.
    pub(super) fn serve(path: &Path, link: AgentLink) -> Result<Self> {
        let listener = server::bind(path)?;
        let answer = link.clone();
        server::serve(listener, Arc::new(AtomicBool::new(false)), move |request| {
            answer.ask(request)
        });
        Ok(Self {
            path: path.to_owned(),
            link,
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The control socket's answer while the agent starts (mode `starting`, [`STARTING_NOTE`]):
/// `status` with `active` (what the agent reports running until it is up: nothing it
/// started), the kernel's state read now and whether the kernel runs `active`; any other
/// request is refused until the agent is up.
pub(super) fn starting(
    active: Active,
    scx: SchedExt,
    catalogue: Catalogue,
) -> impl Fn(Request) -> Response + Send + Sync + 'static {
    let status = AgentStatus::new("starting", active, STARTING_NOTE);
    move |request| match request {
        Request::Status => {
            let kernel = scx.snapshot().ok();
            let kernel_read_unix_ms = Some(unix_ms(SystemTime::now()));
            let consistent = kernel
                .as_ref()
                .map(|k| control::kernel_runs(&catalogue, &status.active.expert, k));
            Response {
                ok: true,
                error: None,
                status: Some(AgentStatus {
                    kernel,
                    kernel_read_unix_ms,
                    consistent,
                    ..status.clone()
                }),
                switch: None,
            }
        }
        _ => control::refusal(STARTING_REFUSAL),
    }
}

/// What a dry run answers a pin or unpin.
pub(super) const DRY_RUN_REFUSAL: &str =
    "this agent is a dry run (`asa run --dry-run`): it switches nothing, so it cannot pin";

/// A control-socket handler for an agent that switches nothing (a dry run, or one waiting for a
/// foreign scheduler): `status` answers from `status` with the kernel's state read now; every
/// other request is refused with `why(status)`.
pub(super) fn status_only(
    status: Arc<Mutex<AgentStatus>>,
    scx: SchedExt,
    why: impl Fn(&AgentStatus) -> String + Send + Sync + 'static,
) -> impl Fn(Request) -> Response + Send + Sync + 'static {
    move |request| {
        let st = status.lock().unwrap().clone();
        match request {
            Request::Status => Response {
                ok: true,
                error: None,
                status: Some(AgentStatus {
                    kernel: scx.snapshot().ok(),
                    kernel_read_unix_ms: Some(unix_ms(SystemTime::now())),
                    ..st
                }),
                switch: None,
            },
            _ => control::refusal(why(&st)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asa_experts::EEVDF;

    /// While the agent starts, `status` reports the kernel's own scheduler with the kernel's
    /// state read at each request, consistent exactly when no BPF scheduler is attached (a
    /// killed agent's expert still detaching is a disagreement, not hidden), and refuses pins.
    #[test]
    fn a_starting_agent_reports_eevdf_and_whether_the_kernel_runs_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("root")).unwrap();
        std::fs::write(root.join("enable_seq"), "3\n").unwrap();
        let eevdf = Active {
            expert: EEVDF.to_string(),
            since_unix_ms: 1,
            pid: None,
        };
        let answer = starting(eevdf, SchedExt::at(root), Catalogue::builtin());
        let status = || answer(Request::Status).status.unwrap();
        std::fs::write(root.join("state"), "enabled\n").unwrap();
        std::fs::write(root.join("root/ops"), "bpfland_1.1.4_x86_64\n").unwrap();
        let st = status();
        assert_eq!(
            (st.mode.as_str(), st.active.expert.as_str()),
            ("starting", EEVDF)
        );
        assert_eq!(st.note, STARTING_NOTE);
        assert_eq!(
            st.kernel.unwrap().ops.as_deref(),
            Some("bpfland_1.1.4_x86_64")
        );
        assert_eq!(st.consistent, Some(false));
        std::fs::write(root.join("state"), "disabled\n").unwrap();
        assert_eq!(status().consistent, Some(true));
        std::fs::remove_file(root.join("state")).unwrap();
        let st = status();
        assert!(st.kernel.is_none() && st.consistent.is_none(), "{st:?}");
        for request in [
            Request::Pin {
                expert: "bpfland".into(),
            },
            Request::Unpin,
        ] {
            let r = answer(request);
            assert!(
                !r.ok && r.error.as_deref() == Some(STARTING_REFUSAL),
                "{r:?}"
            );
        }
    }
}

//! scx_loader's vocabulary in ASA's terms: scheduler names, modes and arguments of
//! `org.scx.Loader` calls mapped to control requests, and the agent's status mapped to the
//! interface's properties. Pure functions, no bus.
//!
//! Invariant: every name the interface reports (CurrentScheduler, SupportedSchedulers,
//! DefaultScheduler) resolves back to the same catalogue expert through [`resolve`], and
//! EEVDF is never reported as a scheduler: it is `"unknown"`, scx_loader's "no scheduler
//! runs".

use asa_experts::Catalogue;

use crate::control::{AgentStatus, Request};

/// What scx_loader reports when no sched_ext scheduler runs (CurrentScheduler), or when no
/// default is configured (DefaultScheduler).
pub const UNKNOWN: &str = "unknown";

/// The scheduler names that hand the choice back to the agent (`asa unpin`) in
/// StartScheduler/SwitchScheduler. scx_loader has no such scheduler; its `Auto` *mode* (0) is
/// "the scheduler's own defaults", which every scxctl call sends, so it cannot mean this.
pub const AGENT_CHOICE: [&str; 2] = ["auto", "scx_auto"];

/// scx_loader's modes (`SchedulerMode`, `sched_mode`): 0 Auto, 1 Gaming, 2 PowerSave,
/// 3 LowLatency, 4 Server.
pub const MODE_NAMES: [&str; 5] = ["Auto", "Gaming", "PowerSave", "LowLatency", "Server"];

/// The one mode ASA runs experts in: Auto, each expert with its catalogue arguments.
pub const MODE_AUTO: u32 = 0;

/// The name scx_loader uses for `expert`: its binary (`scx_bpfland`); [`UNKNOWN`] for EEVDF
/// and for a name the catalogue does not know.
pub fn loader_name(catalogue: &Catalogue, expert: &str) -> String {
    match catalogue.get(expert) {
        Some(e) if !e.is_kernel_default() && !e.binary_name().is_empty() => {
            e.binary_name().to_owned()
        }
        _ => UNKNOWN.to_owned(),
    }
}

/// SupportedSchedulers: the catalogue's available sched_ext experts, by their scx_loader
/// names, in catalogue order.
pub fn supported(catalogue: &Catalogue) -> Vec<String> {
    catalogue
        .available_schedulers()
        .filter(|e| !e.binary_name().is_empty())
        .map(|e| e.binary_name().to_owned())
        .collect()
}

/// The control request a StartScheduler/SwitchScheduler for `scx_name` in `mode` is: a pin of
/// the expert (by its scx_loader name `scx_bpfland` or its catalogue name `bpfland`), or an
/// unpin for [`AGENT_CHOICE`]. `Err` says, for the caller, why the call is refused.
pub fn switch_request(catalogue: &Catalogue, scx_name: &str, mode: u32) -> Result<Request, String> {
    if mode != MODE_AUTO {
        let name = MODE_NAMES
            .get(mode as usize)
            .map(|m| format!("{m} ({mode})"))
            .unwrap_or_else(|| format!("{mode}, which scx_loader does not define either"));
        return Err(format!(
            "mode {name} is not supported: asa runs every expert with its catalogue arguments, in mode Auto (0) only"
        ));
    }
    if AGENT_CHOICE.contains(&scx_name) {
        return Ok(Request::Unpin);
    }
    let usable = |name: &str| {
        catalogue
            .available_schedulers()
            .find(|e| e.name == name)
            .map(|e| e.name.clone())
    };
    let by_binary = catalogue
        .experts()
        .iter()
        .find(|e| !e.binary_name().is_empty() && e.binary_name() == scx_name)
        .and_then(|e| usable(&e.name));
    match by_binary.or_else(|| usable(scx_name)) {
        Some(expert) => Ok(Request::Pin { expert }),
        None => Err(format!(
            "unknown scheduler {scx_name:?}: asa supports {} (or \"auto\": the agent decides)",
            supported(catalogue).join(", ")
        )),
    }
}

/// The request for a `*WithArgs` call: custom arguments are refused (experts run with their
/// catalogue arguments); an empty list is the call without arguments, in mode Auto.
pub fn switch_with_args_request(
    catalogue: &Catalogue,
    scx_name: &str,
    args: &[String],
) -> Result<Request, String> {
    if !args.is_empty() {
        return Err(format!(
            "custom scheduler arguments ({}) are not supported: asa runs every expert with its catalogue arguments",
            args.join(" ")
        ));
    }
    switch_request(catalogue, scx_name, MODE_AUTO)
}

/// CurrentScheduler: the expert the agent runs, by its scx_loader name; [`UNKNOWN`] on EEVDF.
pub fn current_scheduler(catalogue: &Catalogue, status: &AgentStatus) -> String {
    loader_name(catalogue, &status.active.expert)
}

/// DefaultScheduler: the scheduler RestoreDefault (`scxctl restore`, which hands the choice
/// back to the agent) leads to when the agent is unsure: the mapping table's default expert,
/// else its best over all classes. [`UNKNOWN`] without a decision engine (a foreground
/// `asa pin`) or when that expert is EEVDF.
pub fn default_scheduler(catalogue: &Catalogue, status: &AgentStatus) -> String {
    let engine = status.decision.as_ref().map(|d| &d.engine);
    let expert = engine.and_then(|e| e.default_expert.clone().or(e.overall_best.clone()));
    match expert {
        Some(expert) => loader_name(catalogue, &expert),
        None => UNKNOWN.to_owned(),
    }
}

/// The request RestartScheduler is: a pin of the running expert (the supervisor already
/// restarts nothing by hand; a pin keeps what runs, and stops the agent's switching, as a
/// restart under scx_loader keeps its scheduler). `Err` on EEVDF, as scx_loader's "no
/// scheduler is currently running to restart".
pub fn restart_request(status: &AgentStatus, eevdf: &str) -> Result<Request, String> {
    if status.active.expert == eevdf {
        return Err("No scheduler is currently running to restart".to_owned());
    }
    Ok(Request::Pin {
        expert: status.active.expert.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use asa_experts::{Active, EEVDF};

    fn status(active: &str) -> AgentStatus {
        AgentStatus::new(
            "daemon",
            Active {
                expert: active.into(),
                since_unix_ms: 0,
                pid: None,
            },
            "",
        )
    }

    #[test]
    fn scx_loader_names_and_catalogue_names_pin_the_same_expert() {
        let cat = Catalogue::builtin();
        for name in ["scx_bpfland", "bpfland"] {
            assert_eq!(
                switch_request(&cat, name, 0),
                Ok(Request::Pin {
                    expert: "bpfland".into()
                })
            );
        }
        assert_eq!(
            switch_request(&cat, "scx_gru", 0),
            Ok(Request::Pin {
                expert: "gru".into()
            })
        );
        // Every reported name resolves to its expert.
        for name in supported(&cat) {
            let Ok(Request::Pin { expert }) = switch_request(&cat, &name, 0) else {
                panic!("{name} does not resolve");
            };
            assert_eq!(loader_name(&cat, &expert), name);
        }
    }

    #[test]
    fn auto_hands_the_choice_back_and_eevdf_is_no_scheduler() {
        let cat = Catalogue::builtin();
        assert_eq!(switch_request(&cat, "auto", 0), Ok(Request::Unpin));
        assert_eq!(switch_request(&cat, "scx_auto", 0), Ok(Request::Unpin));
        // EEVDF is not a sched_ext scheduler: StopScheduler reaches it, not a switch.
        let err = switch_request(&cat, "eevdf", 0).unwrap_err();
        assert!(err.contains("unknown scheduler \"eevdf\""), "{err}");
        assert!(
            err.contains(
                "scx_bpfland, scx_lavd, scx_rusty, scx_p2dq, scx_flash, scx_cosmos, scx_gru"
            ),
            "{err}"
        );
        assert!(!supported(&cat).iter().any(|s| s.contains("eevdf")));
        assert_eq!(current_scheduler(&cat, &status(EEVDF)), UNKNOWN);
        assert_eq!(current_scheduler(&cat, &status("lavd")), "scx_lavd");
        assert_eq!(
            restart_request(&status("lavd"), EEVDF),
            Ok(Request::Pin {
                expert: "lavd".into()
            })
        );
        assert!(restart_request(&status(EEVDF), EEVDF)
            .unwrap_err()
            .contains("No scheduler is currently running"));
    }

    #[test]
    fn modes_other_than_auto_and_custom_arguments_are_refused() {
        let cat = Catalogue::builtin();
        let err = switch_request(&cat, "scx_bpfland", 1).unwrap_err();
        assert!(err.contains("mode Gaming (1) is not supported"), "{err}");
        let err = switch_request(&cat, "scx_bpfland", 9).unwrap_err();
        assert!(err.contains("mode 9, which scx_loader"), "{err}");
        let err = switch_with_args_request(&cat, "scx_bpfland", &["-s".into(), "20000".into()])
            .unwrap_err();
        assert!(
            err.contains("custom scheduler arguments (-s 20000)"),
            "{err}"
        );
        assert_eq!(
            switch_with_args_request(&cat, "scx_bpfland", &[]),
            Ok(Request::Pin {
                expert: "bpfland".into()
            })
        );
    }

    #[test]
    fn unavailable_experts_are_neither_listed_nor_pinned() {
        let text = include_str!("../../../experts/catalogue.toml")
            .replace("available = true", "available = false");
        let cat = Catalogue::parse(&text, "test").unwrap();
        assert!(!supported(&cat).contains(&"scx_gru".to_string()));
        assert!(switch_request(&cat, "scx_gru", 0).is_err());
    }

    /// The decision engine's part of a status, with the table's default and overall best.
    pub(crate) fn with_table(
        mut st: AgentStatus,
        default_expert: Option<&str>,
        overall_best: Option<&str>,
    ) -> AgentStatus {
        use crate::decision::engine::EngineInfo;
        st.decision = Some(crate::control::DecisionStatus::new(EngineInfo {
            overall_best: overall_best.map(str::to_owned),
            default_expert: default_expert.map(str::to_owned),
            ..EngineInfo::default()
        }));
        st
    }

    #[test]
    fn default_scheduler_is_the_tables_default_expert_else_its_best_else_unknown() {
        let cat = Catalogue::builtin();
        // No decision engine (a foreground `asa pin`): nothing to restore.
        assert_eq!(default_scheduler(&cat, &status(EEVDF)), UNKNOWN);
        let st = with_table(status(EEVDF), Some("lavd"), Some("bpfland"));
        assert_eq!(default_scheduler(&cat, &st), "scx_lavd");
        let st = with_table(status(EEVDF), None, Some("bpfland"));
        assert_eq!(default_scheduler(&cat, &st), "scx_bpfland");
        let st = with_table(status(EEVDF), Some(EEVDF), Some("bpfland"));
        assert_eq!(default_scheduler(&cat, &st), UNKNOWN);
    }
}

//! ASA's experts: the catalogue of schedulers the agent may switch to, a handle on the
//! kernel's sched_ext state, and the supervisor that starts, stops and watches them.
//!
//! Data flows one way: the agent's decision names an expert; [`Supervisor::switch_to`] makes
//! the kernel run it, and [`Supervisor::check`] reports when the kernel stops running it.

pub mod attach_gate;
pub mod catalogue;
pub mod control_lock;
pub mod locate;
mod process;
mod report;
pub mod sched_ext;
mod standby_pool;
pub mod supervisor;

pub use catalogue::{Catalogue, Expert, ExpertKind, EEVDF};
pub use locate::{
    cache_dir, cached_ort_library, check_version, experts_cache_dir, locate, locate_binary,
    opt_out_of_ort_telemetry, ort_telemetry_off, warn_if_ort_telemetry_on, Located, Origin,
    SearchPath, VersionCheck, ORT_TELEMETRY_OPT_OUT, ORT_VERSION,
};
pub use sched_ext::{parse_events, SchedExt, ScxSnapshot, ScxState};
pub use supervisor::{
    Active, StandbyInfo, StandbyState, Supervisor, SupervisorConfig, SupervisorEvent, SwitchError,
    SwitchReport,
};

//! ASA, the adaptive scheduling agent: perception → decision → action.
//!
//! This library holds the agent's parts; the `asa` binary (src/main.rs) wires them to a CLI.
//! - [`control`]: the control socket protocol between `asa` commands and a running agent;
//! - [`controller`]: the action path, one thread that owns the expert supervisor;
//! - [`daemon`]: `asa run`, the perception → decision → action loop;
//! - [`dbus`]: scx_loader's D-Bus interface (`org.scx.Loader`) answered by the agent;
//! - [`foreign`]: another tool's sched_ext scheduler at start: wait for it, or take over;
//! - [`memory`]: keeping the resident set small (start-up code pages released);
//! - [`sd_notify`]: readiness and watchdog notifications to systemd;
//! - [`switch_bench`]: the switch-time benchmark over every ordered pair of experts.

pub mod control;
pub mod controller;
pub mod daemon;
pub mod dbus;
pub mod decision;
pub mod decision_log;
pub mod foreign;
pub mod memory;
pub mod perception;
pub mod sd_notify;
pub mod stop;
pub mod switch_bench;

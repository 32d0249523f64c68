//! ASA, the adaptive scheduling agent: perception → decision → action.
//!
//! This library holds the agent's parts; the `asa` binary (src/main.rs) wires them to a CLI.
//! - [`control`]: the control socket protocol between `asa` commands and a running agent;
//! - [`action`]: the controller (one thread owns the expert supervisor and does every
//!   switch), a scheduler another tool attached, the switch-time benchmark;
//! - [`daemon`]: `asa run`, the perception → decision → action loop;
//! - [`dbus`]: scx_loader's D-Bus interface (`org.scx.Loader`) answered by the agent;
//! - [`memory`]: keeping the resident set small (start-up code pages released);
//! - [`sd_notify`]: readiness and watchdog notifications to systemd.

pub mod action;
pub mod control;
pub mod daemon;
pub mod dbus;
pub mod decision;
pub mod memory;
pub mod perception;
pub mod sd_notify;
pub mod stop;

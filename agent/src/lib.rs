//! ASA, the adaptive scheduling agent: perception → decision → action.
//!
//! This library holds the agent's parts; the `asa` binary (src/main.rs) wires them to a CLI.
//! - [`control`]: the control socket protocol between `asa` commands and a running agent;
//! - [`controller`]: the action path, one thread that owns the expert supervisor;
//! - [`daemon`]: `asa run`, the perception → decision → action loop;
//! - [`memory`]: keeping the resident set small (start-up code pages released);
//! - [`switch_bench`]: the switch-time benchmark over every ordered pair of experts.

pub mod control;
pub mod controller;
pub mod daemon;
pub mod decision;
pub mod memory;
pub mod perception;
pub mod switch_bench;

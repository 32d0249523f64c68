//! ASA, the adaptive scheduling agent: perception → decision → action.
//!
//! This library holds the agent's parts; the `asa` binary (src/main.rs) wires them to a CLI.
//! The rooms, from the ground up (each imports only the ones above it in this list):
//! - utilities: [`stop`] (the stop flag and the signals that set it), [`memory`] (keeping the
//!   resident set small: start-up code pages released), [`sd_notify`] (readiness and watchdog
//!   notifications to systemd);
//! - [`perception`]: samples → features: the sampler (procfs and BPF) and the feature schema;
//! - [`decision`]: features → class probabilities → time-weighted vote → mapping table →
//!   expert; the engine takes a sample, it never reads the machine;
//! - [`control`]: the control socket between `asa` commands and a running agent: its
//!   protocol, server and client;
//! - [`action`]: → switch: the controller (one thread owns the expert supervisor and does every
//!   switch), a scheduler another tool attached, the switch-time benchmark;
//! - [`dbus`]: scx_loader's D-Bus interface (`org.scx.Loader`) answered by the agent;
//! - [`daemon`]: `asa run`, the loop that composes them: sample, decide, switch, once a tick.

/// The libbpf-rs skeleton `$file` that `build.rs` generated into OUT_DIR, as `mod skel` (with
/// the lints generated code does not meet allowed).
macro_rules! bpf_skeleton {
    ($file:literal) => {
        mod skel {
            #![allow(
                clippy::all,
                clippy::pedantic,
                missing_docs,
                non_camel_case_types,
                non_snake_case,
                non_upper_case_globals,
                unused_imports,
                dead_code
            )]
            include!(concat!(env!("OUT_DIR"), "/", $file));
        }
    };
}

pub mod action;
pub mod control;
pub mod daemon;
pub mod dbus;
pub mod decision;
pub mod memory;
pub mod perception;
pub mod sd_notify;
pub mod stop;

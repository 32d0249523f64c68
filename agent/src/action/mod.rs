//! Action: what the agent does to the machine's scheduler.
//!
//! - [`app_hints`]: per-application mode: each application's class, as its layer's task
//!   hint, into scx_layered's shared task-hint map (a BPF task walk and fork-time inheritance);
//! - [`controller`]: one thread owns the expert supervisor and performs every switch (the
//!   decision engine's, `asa pin`'s, `asa unpin`'s), and tends the hot-standby pool;
//! - [`foreign`]: a sched_ext scheduler another tool attached: look for it, wait for it to go,
//!   or ask its owner to stop (`--take-over`);
//! - [`switch_bench`]: `asa bench-switch`, the switch time of every ordered pair of experts.
//!
//! Action takes the decision's data (the standby candidates) and speaks the control protocol
//! (requests in, status out); it imports nothing from the daemon that drives it.

pub mod app_hints;
pub mod controller;
pub mod foreign;
pub mod oracle_hints;
pub mod switch_bench;

//! Decision: classifier probabilities → time-weighted vote → mapping table → expert.
//!
//! - [`voting`]: Algorithm 1 of the ASA paper (time-weighted probability voting), streaming;
//! - [`classifier`]: the workload classifier, an ONNX model run through ONNX Runtime (`ort`,
//!   loaded at run time from `libonnxruntime.so`), checked against the live feature schema;
//! - [`policy`]: vote → mapping table → expert, with a cooldown and a confidence margin, and a
//!   [`record::DecisionRecord`] per tick for the log and `asa status` ([`record`]);
//! - [`quarantine`]: experts that keep failing are not chosen for a while, with exponential
//!   back-off;
//! - [`standby`]: which experts the hot-standby pool should hold, from the vote;
//! - [`engine`]: the above loaded and checked together; one tick's sample in, a
//!   [`engine::TickRecord`] out.
//!
//! Decision takes perception's data (the live
//! [`FeatureSchema`](crate::perception::schema::FeatureSchema) at load, a
//! [`Sample`](crate::perception::Sample) per tick) and imports nothing from the action side,
//! the daemon or the control socket: the daemon's loop samples and hands the vector down.

pub mod app_classes;
pub mod app_model;
pub mod app_pins;
pub mod classifier;
pub mod engine;
pub mod policy;
pub mod quarantine;
pub mod record;
pub mod standby;
pub mod voting;

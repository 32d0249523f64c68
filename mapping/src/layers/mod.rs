//! Calibration stage layers (`asa calibrate --stage layers`): the table's `[[layer]]` rows,
//! per application class the scx_layered layer policy this machine should use.
//!
//! For each class to calibrate (default: the app classes of the selected scenarios' probes and
//! loads, plus `other`) and each slice of a menu (default 5 ms, 2 ms) other than the class's
//! default slice, a *candidate* is `layered` with that slice for that class alone
//! ([`candidates`]); a class whose layer does not preempt also gets candidates on a share of
//! the CPUs ([`share_candidates`]), one whose layer preempts one without preemption
//! ([`no_preempt_candidates`]) and, asked for, one preempting the previous CPU first
//! ([`preempt_first_candidates`]); their catalogue is `DIR/candidates.toml`. Every scenario runs under `layered`, the
//! candidates and some whole-machine experts (default cosmos), the applications in their
//! labelled classes' layers (the agent's oracle-hint writer). Then, per class, `layered` and
//! the candidates that change that class are scored over the scenarios with an application of
//! the class (all of them for `other`) and ranked by the noise rule with `layered` as the stay
//! arm ([`layer_rows`]); the runs of `layered` and the whole-machine experts give the usual
//! class rows (stage prototype on those runs), so the table says per load whether the layers
//! or one expert serve it better.
//!
//! A run's boot is the kernel boot id the runner recorded with it (runs without one: their
//! results file stands for one boot; [`crate::calibrate::BootKey`]). Runs within a boot agree
//! far more closely than runs of different boots, so with runs from 2 boots or more a
//! candidate must also beat `layered` beyond the spread of their per-boot paired differences
//! ([`crate::calibrate::boot_pairs`]); a row from one boot carries `boots = 1`: no verdict
//! across boots.
//!
//! One job per file: `candidates.rs` the candidates and their catalogue; `rows.rs` the rows
//! from scored runs; `report.rs` their section of `DIR/calibration.md`; `stage.rs` the command
//! (measure or read runs, write the table and report).
//!
//! Calibration can go on from an earlier table (`--layer-base TABLE`, coordinate by
//! coordinate): `layered` then runs that table's plan, each candidate changes one class on top
//! of it (a share candidate keeps the class's calibrated slice), and the new table keeps the
//! base rows of the classes not calibrated again.
//!
//! Invariant: a row leaves the reference plan's policy (`layered`'s: the default plan, or the
//! base table's) only for a candidate that beat `layered` beyond the noise on the scenarios of
//! its class, and its policy is the one that candidate was measured with.

mod candidates;
mod report;
mod rows;
pub(crate) mod stage;

pub use candidates::*;
pub use report::*;
pub use rows::*;
pub use stage::{candidates_path, layers_table, ObserverFactory};

/// The expert that runs the reference layer plan (ASA's default, or a base table's): every
/// class's stay arm.
pub const LAYERED: &str = "layered";

//! scx_floor: the cheapest sched_ext scheduler (`src/bpf/floor.bpf.c`: the kernel's idle-CPU
//! selection and one global FIFO queue), a measuring control for the lab's asa-gru-compare, not
//! an expert.
//! What a load loses under it against EEVDF is sched_ext's own cost on the machine, which no
//! policy can win back. Runs until SIGINT / SIGTERM or until the kernel ejects it.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use log::info;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};

use asa_gru_expert::floor_skel::FloorSkelBuilder;

/// The cheapest sched_ext scheduler: a control for benchmarks.
#[derive(Debug, Parser)]
#[command(version)]
struct Opts {}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let _opts = Opts::parse();
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, shutdown.clone()).context("install signal handler")?;
    }
    let mut open_object = MaybeUninit::uninit();
    let skel_builder = FloorSkelBuilder::default();
    let mut skel = scx_ops_open!(
        skel_builder,
        &mut open_object,
        floor_ops,
        None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
    )?;
    let mut skel = scx_ops_load!(skel, floor_ops, uei)?;
    let link = scx_ops_attach!(skel, floor_ops)?;
    info!("scx_floor attached");
    while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&skel, uei) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(link);
    info!("scx_floor detached");
    uei_report!(&skel, uei)?;
    Ok(())
}

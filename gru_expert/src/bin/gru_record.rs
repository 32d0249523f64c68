//! gru_record: records the default scheduler's placements with the features
//! scx_gru uses (BPF tracing: sched_wakeup, sched_wakeup_new,
//! sched_migrate_task, sched_switch), as CSV for `train/train_gru.py`.
//! Needs root and a kernel with BTF; no sched_ext needed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::RingBufferBuilder;
use log::info;

use asa_gru_expert::features::TaskEvent;
use asa_gru_expert::recorder_skel::RecorderSkelBuilder;

/// Schema name written in the first line of a trace.
const TRACE_SCHEMA: &str = "asa.gru-trace";
/// Schema version of a trace.
const TRACE_VERSION: u32 = 1;

/// Record the default scheduler's CPU placements with task features.
#[derive(Debug, Parser)]
#[command(version)]
struct Opts {
    /// Output CSV file.
    #[arg(long)]
    out: PathBuf,
    /// Stop after this many seconds (0: until SIGINT).
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
    /// Free-text label stored in the header (the workload that ran).
    #[arg(long, default_value = "")]
    label: String,
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let opts = Opts::parse();
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, shutdown.clone()).context("install signal handler")?;
    }

    let nr_cpus = libbpf_rs::num_possible_cpus().context("count possible CPUs")?;
    let file = File::create(&opts.out).with_context(|| format!("create {}", opts.out.display()))?;
    let mut out = BufWriter::new(file);
    writeln!(
        out,
        "# schema={TRACE_SCHEMA} version={TRACE_VERSION} nr_cpus={nr_cpus} label={}",
        opts.label.replace(['\n', ','], " ")
    )?;
    writeln!(
        out,
        "stamp_ns,pid,comm,source,cpu,prio,nr_cpus_allowed,runtime_ns,nvcsw,nivcsw,flags,switch_count"
    )?;

    let mut open_object = MaybeUninit::uninit();
    let open = RecorderSkelBuilder::default()
        .open(&mut open_object)
        .context("open the recorder BPF object")?;
    let mut skel = open.load().context("load the recorder BPF programs")?;
    skel.attach()
        .context("attach the recorder to the sched tracepoints")?;
    info!("recording into {} ({nr_cpus} CPUs)", opts.out.display());

    let mut written = 0u64;
    let mut write_error: Option<std::io::Error> = None;
    {
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.events, |data: &[u8]| {
                let Ok(ev) = TaskEvent::from_bytes(data) else {
                    return 0;
                };
                let line = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{}",
                    ev.stamp_ns,
                    ev.pid,
                    ev.comm.replace([',', '\n', '"'], "_"),
                    ev.source,
                    ev.cpu,
                    ev.prio,
                    ev.nr_cpus_allowed,
                    ev.runtime_ns,
                    ev.nvcsw,
                    ev.nivcsw,
                    ev.flags,
                    ev.switch_count
                );
                match line {
                    Ok(()) => {
                        written += 1;
                        0
                    }
                    Err(e) => {
                        write_error = Some(e);
                        -1
                    }
                }
            })
            .context("register the events ring buffer")?;
        let ring = builder.build().context("build the ring buffer poller")?;
        let started = Instant::now();
        while !shutdown.load(Ordering::Relaxed) {
            if opts.duration > 0.0 && started.elapsed().as_secs_f64() >= opts.duration {
                break;
            }
            if ring.poll(Duration::from_millis(100)).is_err() && !shutdown.load(Ordering::Relaxed) {
                break;
            }
        }
        let _ = ring.consume();
    }
    if let Some(e) = write_error {
        return Err(e).with_context(|| format!("write {}", opts.out.display()));
    }
    out.flush()
        .with_context(|| format!("flush {}", opts.out.display()))?;
    let bss = skel
        .maps
        .bss_data
        .as_ref()
        .context("recorder bss missing")?;
    info!(
        "wrote {written} events to {} (BPF: {} events, {} ring-buffer drops)",
        opts.out.display(),
        bss.nr_events,
        bss.nr_ringbuf_drops
    );
    Ok(())
}

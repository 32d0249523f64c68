//! Compares schedulers in one lab VM run: EEVDF, scx_gru (the committed model, default
//! settings, as `asa pin gru` runs it), scx_gru --no-model (its fallback policy alone) and
//! scx_bpfland by default, on the thesis's workloads with the real tools (sysbench, hackbench
//! from rt-tests, perf), with ratios to EEVDF.
//!
//! ```sh
//! cargo run -p asa-lab --bin asa-gru-compare -- [--rounds 3] [--seconds 10] [--out DIR] \
//!   [--schedulers eevdf,gru,gru-fallback,bpfland] [--loads cpu1,cpu8,io,io8,mixed,hackbench]
//! ```
//! `--help` lists every option; `variants.rs` the scx_gru variants `--schedulers` accepts
//! (`gru-burst40`, `gru-wakebal2+burst8`, ...). Needs the lab (`lab/setup.sh`: qemu, the cached
//! kernel, scx_bpfland, ONNX Runtime in the cache); the root filesystem with sysbench, rt-tests
//! and linux-perf is built on first use.
//!
//! Loads (`--seconds` each): cpu1 `sysbench cpu --threads=1`, cpu8 `sysbench cpu --threads=8`,
//! io `sysbench fileio --threads=1` (random read/write, O_DIRECT, 64 MiB in 8 files), io8 the
//! same with 8 threads (more I/O threads than CPUs, so wake-ups meet running tasks), mixed
//! `sysbench cpu --threads=4` and `sysbench fileio --threads=4` at once, hackbench
//! `hackbench -g 4 -l 100` (processes, sockets). The I/O loads' files are on the guest's
//! virtio-blk disk, or with `--io-timer-disk US` on the lab's timer disk (`asa_lab::timer_disk`:
//! every I/O completes US µs after submission on a guest timer, so the device time is the same
//! under every scheduler).
//!
//! Each round runs every scheduler once, the order rotated per round, after a warm-up pass
//! under EEVDF (TCG translates code on first use). Every load runs under `perf stat -a -e
//! context-switches,cpu-migrations`. The report (`report/`) gives medians over rounds:
//! throughput (sysbench's events/s, hackbench's time) and its range, sysbench's latencies,
//! context switches and migrations per second, context switches per event, the scheduler
//! process's CPU time; throughput ratios paired within rounds with 95 % intervals (`paired.rs`);
//! the kernel's schedstat run-queue waits for every scheduler and Jain's fairness index over
//! sysbench's threads (`schedstat.rs`); each vCPU's local timer interrupts in the I/O loads;
//! scx_gru's own queue waits from its stats file. The instruments `--bpf-prog-stats`,
//! `--wakeup-latency` (`latency.rs`), `--profile-scheduler` (`profile.rs`) and
//! `--thread-samples` add their tables or files and cost guest CPU: profiling runs, not
//! throughput ones.
//!
//! TCG timings are noisy: only ratios within one run mean anything. With
//! `ASA_LAB_ICOUNT=shift=2,sleep=off` (the guest's clock counts executed instructions) and
//! `--io-timer-disk 100`, rounds of cpu1, cpu8, io and io8 agree to 0.1–0.5 %; the report's
//! header names the `-accel` and `-icount`. Single-threaded TCG (with or without `-icount`)
//! runs the vCPUs in turn from vCPU 0, whose interrupts come first, so the mixed load's two
//! parts follow where a scheduler put its I/O threads
//! (results/2026-11-27-lab-vcpu0-takes-interrupts-first/): the report then says so and gives the
//! load as a whole, "mixed (both parts)", the geometric mean of the parts' ratios per round.

mod args;
mod guest;
mod lab;
mod latency;
mod paired;
mod parse;
mod profile;
mod report;
mod runs;
mod schedstat;
mod stats;
mod variants;

use anyhow::Result;
use clap::Parser;

use args::Args;

fn main() -> Result<()> {
    let args = Args::parse();
    args.check()?;
    let outcome = match &args.from_out {
        Some(out_dir) => lab::earlier_run(out_dir)?,
        None => lab::run_guest(&args)?,
    };
    report::report(&args, &outcome)
}

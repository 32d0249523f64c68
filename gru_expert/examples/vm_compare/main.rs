//! The benchmark of issue 7: EEVDF, scx_gru (with the committed model, default settings, as
//! `asa pin gru` runs it), scx_gru --no-model (its fallback policy alone) and scx_bpfland on the
//! thesis's workloads with the real tools (sysbench, hackbench from rt-tests, perf) in one lab
//! VM run (a Debian root filesystem), and ratios to EEVDF next to the thesis's numbers.
//!
//! ```sh
//! cargo build -p asa-gru-expert && \
//!   cargo run -p asa-gru-expert --example vm_compare -- [--rounds 3] [--seconds 10] [--out DIR] \
//!   [--schedulers eevdf,gru,gru-fallback,bpfland] [--loads cpu1,cpu8,io,io8,mixed,hackbench]
//! ```
//! `--loads` runs some of the loads below (all by default): more rounds of the noisy ones in the
//! same time.
//! `--schedulers` may also name `gru-noinfer` (scx_gru with the model loaded and the event path
//! running, inference budget 0: no inference), to tell the event path's cost from the GRU's,
//! `gru-observe` (`--observe-only`: the model runs, its predictions are written and looked up,
//! but every placement is the fallback's), to tell the inference's cost from its placements',
//! `gru-nogate` (`--min-followed-pct 0`: inference never pauses, as before 2026-11-26, when
//! its predictions' CPUs are busy), `gru-userfirst` (`--usersched-always-first`: scx_gru's own
//! thread stays first on its CPU after its slice too, as before 2026-11-26), `gru-busykeep`
//! (`--busy-pause-keeps-events`: a busy pause keeps the events, as before 2026-11-26; run 59
//! measured the opposite as `gru-busystop`), `floor` (scx_floor,
//! this crate's control: the kernel's idle-CPU selection and one global FIFO, the cheapest
//! sched_ext scheduler; what a load loses under it is sched_ext's own cost),
//! `gru-preempt` (wakeup preemption; since 2026-11-25 a deadline comparison after 1 ms of run,
//! `--preempt-min-run-us 1000`; `gru-preemptN` after N µs, e.g. `gru-preempt0` at once —
//! 250 µs was the default from run 18, 2 000 µs since run 81, so `gru-preempt2000` is `gru`
//! now; `gru-nopreempt` is
//! `--no-wakeup-preempt`, the default before), `gru-affinityN` (`--dispatch-affinity-us N`: a
//! CPU takes a task that last ran on it ahead of the shared DSQ's head within N µs of vtime;
//! 1000 was the default from run 24 to run 70, `gru-affinity0` the head always, the default
//! again since run 71),
//! `gru-budgetN` (`--inference-budget-pct N`: the model may use N % of a CPU, 5 by default),
//! `gru-movedN` (`--min-moved-pct N`: inference pauses while under N % of usable predictions
//! move a task, 1 by default; `gru-moved0` never pauses for that),
//! `gru-nopinned` (`--no-pinned-preempt`: waking single-CPU tasks, per-CPU kernel threads, wait
//! for the running task's slice instead of preempting it by the deadline rule),
//! `gru-nodefer` (`--deferred-preempt-us 0`: a wake-up that would preempt a CPU hog but for the
//! minimum run waits for the slice instead of arming the CPU's timer), `gru-deferN`
//! (`--deferred-preempt-us N`: the timer preempts the hog once it has run N µs),
//! `gru-nowake` (`--no-wake-queues`: every waiting task in the shared DSQ, as before
//! 2026-11-26, instead of a wake-up in its CPU's wake queue), `gru-wakebalN` (`--wake-balance N`:
//! a wake-up waits in another CPU's wake queue when its own CPU's holds N more tasks),
//! `gru-kthreadN` (`--kthread-preempt-us N`: a waking kernel thread preempts a CPU hog once
//! the hog has run N µs; off by default)
//! (scx_gru variants combine with `+`: `gru-wakebal2+burst8` is `--wake-balance 2
//! --burst-cap-ms 8`)
//! and `gru-slice` (scx_gru `--slice-min-us 500`:
//! the slice shrinks with the shared DSQ's queue; the default since 2026-11-24, so the same as
//! `gru` now) and `gru-fixed` (`--slice-min-us 0`: the fixed 5 ms slice, the default before).
//! (In the A/B run of 2026-11-23, when wakeup preemption was the default, `gru-nopreempt`
//! named what `gru` runs now.)
//! `gru-burst` is scx_gru `--burst-cap-ms 5` (the shared DSQ ordered by vtime + the vtime used
//! since the last wake-up, capped at 5 ms; the default after run 87, so the same as `gru`
//! now), `gru-burst40` the same with a 40 ms cap (scx_bpfland's slice lag; the default from
//! 2026-11-25 to run 87), `gru-burstN` with an N ms cap, and `gru-vtime` `--burst-cap-ms 0`
//! (ordered by vtime alone: `gru` before 2026-11-25). `gru-batch1` is scx_gru
//! `--max-batch 1`: one model run per task, as before 2026-11-25.
//! The "sched CPU %" column is the CPU time of the scheduler's user-space process (all its
//! threads, from `/proc/PID/stat`) during the load, in percent of one CPU; BPF programs run
//! in the context of the scheduled tasks and are not in it.
//! Every scx_gru variant writes its stats file every 0.5 s, copied before and after each load
//! (0.6 s after the previous load ended, so no load's waits count for another): a third table
//! gives its queue waits (runnable → running) per load, for short-burst tasks and the others.
//! `--bpf-prog-stats` turns on `kernel.bpf_stats_enabled` in the guest and dumps `bpftool -j
//! prog show` around every load: the "BPF CPU %" column is the time in the scheduler's
//! struct_ops programs during the load in percent of one CPU, and a second table gives each op's
//! calls/s and ns per call (a profiling run: the stats add two clock reads per program run;
//! the root filesystem then also holds bpftool, cached separately).
//! `--wakeup-latency` runs `asa record` (the agent's BPF perception) around every load and adds
//! a table of every task's wakeup-to-run latency, p50 and p99 per 1 s tick (`latency.rs`; a
//! profiling run too: its probes fire on every switch and wake-up).
//! `--thread-samples` samples every sysbench thread's last CPU and schedstat (run, wait, time
//! slices) every 0.5 s during every load into the guest's `thr-SCHED-ROUND-LOAD.txt`
//! (`python -m asa_analysis.thread_samples`, in lab/analysis, reads them: how many of the mixed load's I/O threads
//! sit on each CPU, and what each part ran). A profiling run: the sampler's shell costs io8
//! about 8 % under every scheduler (run 99).
//! `--no-thp` turns transparent huge pages off in the guest (`never`, written to `thp.txt`), so
//! khugepaged has nothing to collapse.
//! `--profile-scheduler` runs `perf record -e cpu-clock -p PID` on the scheduler's user-space
//! process around every load and adds a table of where that process spent its samples, by
//! shared object and symbol (`profile.rs`; a profiling run: perf's sampling takes guest CPU).
//! Needs the lab (`lab/setup.sh`: qemu, the cached kernel, scx_bpfland, ONNX Runtime in the
//! cache); the root filesystem with sysbench, rt-tests and linux-perf is built on first use.
//!
//! Loads (`--seconds` each): cpu1 `sysbench cpu --threads=1`, cpu8 `sysbench cpu --threads=8`, io
//! `sysbench fileio --threads=1` (random read/write, O_DIRECT, 64 MiB in 8 files on the guest's
//! virtio disk), io8 the same with 8 threads (the thesis's eight-thread I/O test: more I/O
//! threads than CPUs, so wake-ups meet running tasks), mixed `sysbench cpu --threads=4` and
//! `sysbench fileio --threads=4` at once, hackbench `hackbench -g 4 -l 100` (processes,
//! sockets). (Until 2026-11-25 the disk was qemu's emulated NVMe, which lost completions with
//! several I/Os in flight — every io8 run and a third of the mixed runs stalled ~60 s under
//! every scheduler — so io8 was left out; the lab's disks are virtio-blk since, and
//! `ASA_LAB_DISK=nvme` reproduces the runs before.)
//! `--io-timer-disk US` puts the I/O loads' files (io, io8, the mixed load's I/O part) on the
//! lab's timer disk instead (`asa_lab::timer_disk`: a RAM-backed null_blk device in the guest
//! whose every I/O completes US µs after submission on a guest timer): the device time is the
//! same under every scheduler and nothing passes through the host's disk, the source of most
//! of the I/O loads' round-to-round scatter. The report names the disk.
//! Every load runs under `perf stat -a -e context-switches,cpu-migrations`. Per run: events/s
//! (sysbench: total events / total time), latency avg/p95/max in ms (sysbench), context switches
//! and migrations per second of wall time, context switches per event (the single sysbench loads:
//! an I/O load's switches per completed I/O), wall time (hackbench: its own "Time:"); around
//! every load the kernel's schedstat (`schedstat.rs`): time slices and the mean run-queue wait
//! before one, of every task and of the kernel threads, for every scheduler alike (the thesis's
//! `perf sched latency` totals), and Jain's fairness index over sysbench's threads. Each round
//! runs every scheduler once, the order rotated per round; the table shows the median over rounds
//! and, for throughput, the range. A warm-up pass under EEVDF comes first (TCG translates code on
//! first use). TCG timings are noisy: only ratios within one run mean anything. With
//! `ASA_LAB_ICOUNT=shift=2,sleep=off` (the lab's instruction counting: the guest's clock counts
//! executed instructions) and `--io-timer-disk 100`, rounds of cpu1, cpu8, io and io8 agree to
//! 0.1–0.5 % (run 64 of gru_expert/README.md); the header names the `-icount` next to the
//! `-accel`. Single-threaded TCG (with or without `-icount`) runs the vCPUs in turn from vCPU 0,
//! whose interrupts come first: an I/O thread beside a hog completes its I/Os later on vCPU 1,
//! so the mixed load's two parts follow where a scheduler put its I/O threads
//! (results/2026-11-27-lab-vcpu0-takes-interrupts-first/). The report then says so, gives the
//! load as a whole ("mixed (both parts)", the geometric mean of the parts' ratios per round,
//! which EEVDF's placements leave within ±2 %), and each vCPU's local timer interrupts per
//! second in every I/O round (the timer disk's completions land on the submitting vCPU).

mod latency;
mod paired;
mod profile;
mod schedstat;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use asa_gru_expert::stats::BpfCounters;
use asa_lab::{GuestRun, Lab, RootfsSpec, VmOutcome};
use schedstat::LoadDelays;
use serde::Serialize;

/// Every scheduler the guest script knows besides the numbered variants ([`NUMBERED_VARIANTS`];
/// the default set is [`DEFAULT_SCHEDULERS`]).
const SCHEDULERS: [&str; 21] = [
    "eevdf",
    "gru",
    "gru-batch1",
    "gru-burst",
    "gru-burst40",
    "gru-vtime",
    "gru-fixed",
    "gru-noinfer",
    "gru-observe",
    "gru-nogate",
    "gru-userfirst",
    "gru-busykeep",
    "gru-fallback",
    "gru-preempt",
    "gru-nopreempt",
    "gru-nopinned",
    "gru-nodefer",
    "gru-nowake",
    "gru-slice",
    "bpfland",
    "floor",
];
const DEFAULT_SCHEDULERS: [&str; 4] = ["eevdf", "gru", "gru-fallback", "bpfland"];
/// Rows of the table: the mixed load has a CPU part and an I/O part.
const ROWS: [&str; 7] = [
    "cpu1",
    "cpu8",
    "io",
    "io8",
    "mixed-cpu",
    "mixed-io",
    "hackbench",
];
/// The loads of the guest script, in the order it runs them (`--loads` picks some).
const LOADS: [&str; 6] = ["cpu1", "cpu8", "io", "io8", "mixed", "hackbench"];
/// The cargo profile of this example, and so of the scx_gru it runs (the same target folder).
const PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};
/// The guest's Debian packages for the loads.
const PACKAGES: [&str; 3] = ["sysbench", "rt-tests", "linux-perf"];
/// The guest's package for `--bpf-prog-stats` (a root filesystem of its own, cached).
const BPF_STATS_PACKAGE: &str = "bpftool";

const SCRIPT: &str = r##"
set -u
out=/lab/out
S=__SECONDS__
FIO="--file-total-size=64M --file-num=8 --file-test-mode=rndrw --file-extra-flags=direct"
measure() {
  s=$1; r=$2; l=$3; shift 3
  lat_start $out/lat-$s-$r-$l.csv
  prof_start $out/prof-$s-$r-$l.txt
  # The snapshots stay outside the timed window (wall time, the scheduler's CPU time).
  progs $out/bpf-$s-$r-$l-0.json
  snap $out/st-$s-$r-$l-0.json
  c0=$(sched_ticks)
  schedstat $out/ss-$s-$r-$l-0.txt
  t0=$(cut -d' ' -f1 /proc/uptime)
  lat_mark $out/lat-$s-$r-$l.span
  thr_start $out/thr-$s-$r-$l.txt
  perf stat -a -e context-switches,cpu-migrations -x, -o $out/perf-$s-$r-$l.txt -- "$@" > $out/load-$s-$r-$l.txt 2>&1
  rc=$?
  thr_stop
  lat_mark $out/lat-$s-$r-$l.span
  t1=$(cut -d' ' -f1 /proc/uptime)
  schedstat $out/ss-$s-$r-$l-1.txt
  c1=$(sched_ticks)
  progs $out/bpf-$s-$r-$l-1.json
  snap $out/st-$s-$r-$l-1.json
  lat_stop
  # (perf report takes seconds under TCG: after every measurement)
  prof_stop $out/prof-$s-$r-$l.txt
  echo "$s $r $l $rc $t0 $t1 $c0 $c1" >> $out/runs.txt
}
# The loads to run (--loads).
LOADS=" __LOADS__ "
want() { case "$LOADS" in *" $1 "*) return 0 ;; esac; return 1; }
loads() {
  s=$1; r=$2
  want cpu1 && measure $s $r cpu1 sysbench cpu --threads=1 --time=$S run
  want cpu8 && measure $s $r cpu8 sysbench cpu --threads=8 --time=$S run
  want io && measure $s $r io sysbench fileio $FIO --threads=1 --time=$S run
  want io8 && measure $s $r io8 sysbench fileio $FIO --threads=8 --time=$S run
  want mixed && measure $s $r mixed sh -c "sysbench cpu --threads=4 --time=$S run > $out/load-$s-$r-mixed-cpu.txt 2>&1 &
    sysbench fileio $FIO --threads=4 --time=$S run > $out/load-$s-$r-mixed-io.txt 2>&1; wait"
  want hackbench && measure $s $r hackbench hackbench -g 4 -l 100
  return 0
}
state() { cat /sys/kernel/sched_ext/state; }
__SCHEDSTAT__
__RECORD__
__PROFILE__
# Every 0.5 s during each load (--thread-samples): the time, each sysbench process's command
# line, and every one of its threads' stat (field 39: the CPU it last ran on), schedstat
# (run ns, wait ns, time slices) and wchan, the same for the ext4 journal threads (jbd2), for
# thread_samples.py. (A profiling run: it cost io8 ~8 % under every scheduler, run 99.)
THREADS=__THREADS__
TP=
thr_start() {
  if [ $THREADS = 1 ]; then
    J=$(grep -l '^jbd2' /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3)
    ( while :; do
        echo "@ $(cut -d' ' -f1 /proc/uptime)"
        for p in $(pidof sysbench) $J; do
          echo "cmd $p $(tr '\0' ' ' < /proc/$p/cmdline)"
          grep -H '' /proc/$p/task/*/stat /proc/$p/task/*/schedstat /proc/$p/task/*/wchan
        done 2>/dev/null
        sleep 0.5
      done > $1 ) &
    TP=$!
  fi
}
thr_stop() { if [ -n "$TP" ]; then kill $TP; wait $TP 2>/dev/null; TP=; fi; }
# The run time and run count of every BPF program (kernel.bpf_stats_enabled), with --bpf-prog-stats.
BPF_STATS=__BPF_STATS__
progs() { if [ $BPF_STATS = 1 ]; then bpftool -j prog show > $1 2>&1; fi; }
[ $BPF_STATS = 1 ] && { echo 1 > /proc/sys/kernel/bpf_stats_enabled || exit 4; }
# CPU time (utime + stime, all threads, clock ticks) of the scheduler's user-space process.
sched_ticks() { if [ -n "$P" ]; then awk '{print $14 + $15}' /proc/$P/stat; else echo 0; fi; }
waitstate() { i=0; while [ "$(state)" != $1 ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; }
P=
STATS=
# A copy of scx_gru's stats file (rewritten every 0.5 s), around each load.
# (A failed copy is retried once and reported in snap-errors.txt: one copy went missing once.)
snap() {
  if [ -n "$STATS" ]; then
    sleep 0.6
    cp $STATS $1 2>> $out/snap-errors.txt || { sleep 0.3; cp $STATS $1 2>> $out/snap-errors.txt; }
  fi
}
# gru NAME ROUND [ARGS]: scx_gru with ARGS in the background, its stats and log named after NAME.
gru() {
  gru_name=$1; gru_round=$2; shift 2
  STATS=$out/stats-$gru_name-$gru_round.json
  scx_gru "$@" --stats-file $STATS --stats-interval 0.5 \
    > $out/log-$gru_name-$gru_round.txt 2>&1 &
  P=$!
}
# gru_flags VARIANT: scx_gru's options for one variant (gru-burst, gru-wakebal2, ...).
gru_flags() {
  case $1 in
    gru-batch1) echo --max-batch 1 ;;
    gru-burst) echo --burst-cap-ms 5 ;;
    gru-vtime) echo --burst-cap-ms 0 ;;
    gru-burst[0-9]*) echo --burst-cap-ms ${1#gru-burst} ;;
    gru-noinfer) echo --inference-budget-pct 0 ;;
    gru-observe) echo --observe-only ;;
    gru-nogate) echo --min-followed-pct 0 ;;
    gru-userfirst) echo --usersched-always-first ;;
    gru-busykeep) echo --busy-pause-keeps-events ;;
    gru-fallback) echo --no-model ;;
    gru-preempt) echo --preempt-min-run-us 1000 ;;
    gru-preempt[0-9]*) echo --preempt-min-run-us ${1#gru-preempt} ;;
    gru-affinity[0-9]*) echo --dispatch-affinity-us ${1#gru-affinity} ;;
    gru-budget[0-9]*) echo --inference-budget-pct ${1#gru-budget} ;;
    gru-moved[0-9]*) echo --min-moved-pct ${1#gru-moved} ;;
    gru-nopreempt) echo --no-wakeup-preempt ;;
    gru-nopinned) echo --no-pinned-preempt ;;
    gru-kthread[0-9]*) echo --kthread-preempt-us ${1#gru-kthread} ;;
    gru-nodefer) echo --deferred-preempt-us 0 ;;
    gru-nowake) echo --no-wake-queues ;;
    gru-wakebal[0-9]*) echo --wake-balance ${1#gru-wakebal} ;;
    gru-defer[0-9]*) echo --deferred-preempt-us ${1#gru-defer} ;;
    gru-fixed) echo --slice-min-us 0 ;;
    gru-slice) echo --slice-min-us 500 ;;
    *) echo "unknown scx_gru variant $1" >&2; return 1 ;;
  esac
}
start() {
  STATS=
  case $1 in
    eevdf) P= ;;
    # gru, gru-VARIANT or gru-VARIANT+VARIANT...: the options of every part together.
    gru|gru-*)
      flags= parts=${1#gru}
      for part in $(echo "${parts#-}" | tr + ' '); do
        flags="$flags $(gru_flags gru-$part)" || return 1
      done
      gru $1 $2 $flags ;;
    bpfland) scx_bpfland > $out/log-bpfland-$2.txt 2>&1 & P=$! ;;
    floor) scx_floor > $out/log-floor-$2.txt 2>&1 & P=$! ;;
  esac
  [ -n "$P" ] && waitstate enabled
  echo "# start $1 $2 $(state) $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)" >> $out/runs.txt
}
stop() {
  echo "# end $1 $2 $(state) $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)" >> $out/runs.txt
  if [ -n "$P" ]; then kill -INT $P; wait $P; waitstate disabled; fi
}
# --no-thp: no transparent huge pages, so no khugepaged collapsing the loads' memory.
if [ __NO_THP__ = 1 ]; then
  echo never > /sys/kernel/mm/transparent_hugepage/enabled || exit 6
  echo never > /sys/kernel/mm/transparent_hugepage/defrag || exit 6
fi
cat /sys/kernel/mm/transparent_hugepage/enabled > $out/thp.txt 2>&1
__IO_DISK__
cd /root/sb
sysbench fileio --file-total-size=64M --file-num=8 prepare > $out/fileio-prepare.txt 2>&1 || exit 3
getconf CLK_TCK > $out/clk_tck.txt
perf --version > $out/versions.txt; sysbench --version >> $out/versions.txt; uname -r >> $out/versions.txt
loads warmup 0
__ROUNDS__
# The kernel log: a load that stalls (the mixed load's I/O part, ~60 s, now and then under
# every scheduler) may leave a device or hung-task message in it.
dmesg > $out/dmesg.txt 2>&1
"##;

/// One sysbench report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Sysbench {
    events_per_s: f64,
    lat_avg_ms: f64,
    lat_p95_ms: f64,
    lat_max_ms: f64,
    /// Jain's fairness index over the threads' event counts, (Σx)² / (n·Σx²) = 1 / (1 + cv²),
    /// from sysbench's "events (avg/stddev)" (the population deviation over the threads):
    /// 1 when every thread did as much, 1/n when one did everything.
    fairness: Option<f64>,
}

/// Measurements of one scheduler, one round, one row.
#[derive(Debug, Clone, Default, Serialize)]
struct Run {
    scheduler: String,
    round: u32,
    row: String,
    sysbench: Option<Sysbench>,
    /// hackbench's own time, s.
    hackbench_s: Option<f64>,
    context_switches: Option<f64>,
    migrations: Option<f64>,
    wall_s: f64,
    /// CPU time of the scheduler's user-space process during the load, s (None under EEVDF).
    sched_cpu_s: Option<f64>,
    /// With `--bpf-prog-stats`: the scheduler's struct_ops programs during the load, by name.
    bpf_ops: BTreeMap<String, BpfOp>,
    /// With `--profile-scheduler`: perf samples of the scheduler's process during the load, by
    /// "shared object: symbol".
    profile: BTreeMap<String, u64>,
    /// scx_gru's queue waits during the load (None for other schedulers).
    waits: Option<Waits>,
    /// Run-queue waits of every task and of the kernel threads, from the kernel's schedstat
    /// (any scheduler; None when a snapshot is missing).
    delays: Option<LoadDelays>,
    /// With `--wakeup-latency`: every task's wakeup-to-run latency during the load.
    wake: Option<latency::WakeLatency>,
}

/// scx_gru's queue waits (runnable → running) during one load, from its stats file copied
/// before and after the load: count and total ns, short-burst tasks and the others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
struct Waits {
    short_n: u64,
    short_ns: u64,
    long_n: u64,
    long_ns: u64,
}

impl Waits {
    /// The difference of the wait counters of two stats files (`asa.gru-stats`).
    fn between(before: &str, after: &str) -> Result<Self> {
        let counters = |text: &str| -> Result<[u64; 4]> {
            let v: serde_json::Value = serde_json::from_str(text).context("a stats file")?;
            let get = |k: &str| v["bpf"][k].as_u64().with_context(|| format!("no bpf.{k}"));
            Ok([
                get("nr_waits_short")?,
                get("wait_ns_short")?,
                get("nr_waits_long")?,
                get("wait_ns_long")?,
            ])
        };
        let (a, b) = (counters(before)?, counters(after)?);
        let d = |i: usize| b[i].saturating_sub(a[i]);
        Ok(Self {
            short_n: d(0),
            short_ns: d(1),
            long_n: d(2),
            long_ns: d(3),
        })
    }
    /// Mean wait in µs of short-burst tasks (`short`) or of the others (as scx_gru's stats
    /// compute it).
    fn mean_us(&self, short: bool) -> Option<f64> {
        BpfCounters {
            nr_waits_short: self.short_n,
            wait_ns_short: self.short_ns,
            nr_waits_long: self.long_n,
            wait_ns_long: self.long_ns,
            ..BpfCounters::default()
        }
        .mean_wait_us(short)
    }
}

/// The loads of the per-load tables: the mixed load's two rows come from one run, so it is
/// shown once, as "mixed" (its row "mixed-cpu" holds the run). Yields (row, load name).
fn per_load_rows() -> impl Iterator<Item = (&'static str, &'static str)> {
    ROWS.into_iter()
        .filter(|row| *row != "mixed-io")
        .map(|row| (row, if row == "mixed-cpu" { "mixed" } else { row }))
}

/// Calls and run time of one BPF program during one load (kernel.bpf_stats_enabled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
struct BpfOp {
    calls: u64,
    ns: u64,
}

/// The struct_ops programs' run counts and times between two `bpftool -j prog show` dumps,
/// by program name (programs are matched by id; a program absent before counts from zero).
fn bpf_op_deltas(before: &str, after: &str) -> Result<BTreeMap<String, BpfOp>> {
    let parse = |text: &str| -> Result<BTreeMap<u64, (String, BpfOp)>> {
        let progs: Vec<serde_json::Value> =
            serde_json::from_str(text).with_context(|| format!("bpftool output {text:?}"))?;
        Ok(progs
            .iter()
            .filter(|p| p["type"] == "struct_ops")
            .filter_map(|p| {
                let op = BpfOp {
                    // bpftool leaves both fields out while the run time is 0.
                    calls: p["run_cnt"].as_u64().unwrap_or(0),
                    ns: p["run_time_ns"].as_u64().unwrap_or(0),
                };
                Some((p["id"].as_u64()?, (p["name"].as_str()?.to_owned(), op)))
            })
            .collect())
    };
    let before = parse(before)?;
    let mut ops = BTreeMap::new();
    for (id, (name, after)) in parse(after)? {
        let start = before.get(&id).map_or(BpfOp::default(), |(_, op)| *op);
        ops.insert(
            name,
            BpfOp {
                calls: after.calls.saturating_sub(start.calls),
                ns: after.ns.saturating_sub(start.ns),
            },
        );
    }
    Ok(ops)
}

impl Run {
    /// events/s for sysbench rows, runs per second (1 / time) for hackbench.
    fn throughput(&self) -> Option<f64> {
        self.sysbench
            .map(|s| s.events_per_s)
            .or(self.hackbench_s.filter(|t| *t > 0.0).map(|t| 1.0 / t))
    }
    /// The scheduler process's CPU time as a percentage of one CPU over the load's wall time.
    fn sched_cpu_pct(&self) -> Option<f64> {
        self.per_s(self.sched_cpu_s).map(|v| v * 100.0)
    }
    /// The time in the scheduler's BPF programs as a percentage of one CPU over the load.
    fn bpf_cpu_pct(&self) -> Option<f64> {
        let ns: u64 = self.bpf_ops.values().map(|op| op.ns).sum();
        (!self.bpf_ops.is_empty())
            .then(|| self.per_s(Some(ns as f64 / 1e9)))
            .flatten()
            .map(|v| v * 100.0)
    }
    /// Context switches per completed event, for a load that is one sysbench run (the mixed
    /// load's switches belong to both of its parts): on an I/O load a scheduler that runs
    /// fewer I/Os also switches less per second, not per I/O.
    fn cs_per_event(&self) -> Option<f64> {
        let events_per_s = self.sysbench?.events_per_s;
        (!self.row.starts_with("mixed") && events_per_s > 0.0)
            .then(|| self.per_s(self.context_switches))
            .flatten()
            .map(|cs| cs / events_per_s)
    }
    fn per_s(&self, v: Option<f64>) -> Option<f64> {
        v.filter(|_| self.wall_s > 0.0).map(|v| v / self.wall_s)
    }
}

/// The number after `label` on the first line that contains it (`label: 12.5` or `12.5s`).
fn value_after(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    rest.trim()
        .trim_end_matches('s')
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// sysbench 1.0 (cpu or fileio): events / total time, latency avg / 95th percentile / max.
fn parse_sysbench(text: &str) -> Option<Sysbench> {
    let total_s = value_after(text, "total time:")?;
    let events = value_after(text, "total number of events:")?;
    let latency = &text[text.find("Latency (ms):")?..];
    Some(Sysbench {
        events_per_s: (total_s > 0.0).then(|| events / total_s)?,
        lat_avg_ms: value_after(latency, "avg:")?,
        lat_p95_ms: value_after(latency, "95th percentile:")?,
        lat_max_ms: value_after(latency, "max:")?,
        fairness: jain_fairness(text),
    })
}

/// Jain's fairness index from sysbench's "events (avg/stddev): 1234.5000/12.34" line.
fn jain_fairness(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains("events (avg/stddev):"))?;
    let (avg, stddev) = line.split(':').nth(1)?.trim().split_once('/')?;
    let (avg, stddev): (f64, f64) = (avg.parse().ok()?, stddev.parse().ok()?);
    (avg > 0.0).then(|| 1.0 / (1.0 + (stddev / avg).powi(2)))
}

/// hackbench's "Time: 1.234".
fn parse_hackbench(text: &str) -> Option<f64> {
    value_after(text, "Time:")
}

/// A counter from `perf stat -x,` output.
fn perf_counter(text: &str, event: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.split(',').nth(2) == Some(event))
        .and_then(|l| l.split(',').next()?.parse().ok())
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

struct Args {
    rounds: u32,
    seconds: u32,
    out: Option<PathBuf>,
    schedulers: Vec<String>,
    /// The loads to run, a subset of [`LOADS`] (all by default).
    loads: Vec<String>,
    /// Record every BPF program's run time (kernel.bpf_stats_enabled; costs two clock reads
    /// per program run, so a profiling run, not a throughput one).
    bpf_prog_stats: bool,
    /// Record every task's wakeup-to-run latency with `asa record` around every load
    /// (`latency.rs`; tracepoints on every switch, so a profiling run).
    wakeup_latency: bool,
    /// Profile the scheduler's user-space process with `perf record` during every load
    /// (`profile.rs`; perf's sampling takes guest CPU, so a profiling run).
    profile_scheduler: bool,
    /// Sample every sysbench thread's last CPU and schedstat every 0.5 s during every load
    /// (`thr-SCHED-ROUND-LOAD.txt` in the guest's out folder, for
    /// `python -m asa_analysis.thread_samples` (lab/analysis): where the mixed load's threads run; a
    /// profiling run, io8 ~8 % slower under every scheduler).
    thread_samples: bool,
    /// Turn transparent huge pages off in the guest (`never`), so khugepaged has nothing to
    /// collapse (runs 98-101: under scx_gru it ran ~100x longer than under EEVDF on the mixed
    /// load).
    no_thp: bool,
    /// Analyse the `/lab/out` an earlier run left (the lab keeps it in its run folder,
    /// `~/.cache/asa/lab/runs/gru-compare-PID/out`) instead of running the VM: the same
    /// `--schedulers`, `--rounds` and `--bpf-prog-stats` as that run; `--loads` may pick some of
    /// the loads it measured.
    from_out: Option<PathBuf>,
    /// With `Some(µs)` (`--io-timer-disk US`), the I/O loads' files are on the lab's timer disk
    /// (`asa_lab::timer_disk`: RAM-backed null_blk, every I/O completing after US µs on a guest
    /// timer) instead of the root filesystem's virtio disk.
    io_timer_disk_us: Option<u32>,
}

/// The scx_gru variants named PREFIX + a number N, each with a `PREFIXN` case in the guest
/// script: `gru-preemptN` (`--preempt-min-run-us N`: wake-ups preempt a task that has run N µs)
/// `gru-affinityN` (`--dispatch-affinity-us N`), `gru-budgetN` (`--inference-budget-pct N`:
/// the model may use N % of a CPU; the default is 5) and `gru-burstN` (`--burst-cap-ms N`).
const NUMBERED_VARIANTS: [&str; 8] = [
    "gru-preempt",
    "gru-affinity",
    "gru-budget",
    "gru-moved",
    "gru-defer",
    "gru-burst",
    "gru-wakebal",
    "gru-kthread",
];

/// How long the guest script may take: a minute per measurement for 10 s loads (every load,
/// scheduler and round, the warm-up round too) and 5 minutes for the boot and the fileio
/// files. Until 2026-11-26 it was 110 s per scheduler and round whatever the loads: run 85 (six
/// loads, qemu 10 under instruction counting) was stopped at 27 minutes with no results, most
/// likely by it.
fn vm_budget(args: &Args) -> Duration {
    let per_measurement = 3 * u64::from(args.seconds) + 30;
    let measurements =
        (args.loads.len() * args.schedulers.len()) as u64 * u64::from(args.rounds + 1);
    Duration::from_secs(per_measurement * measurements + 300)
}

/// Whether the guest script can start `name`: one of [`SCHEDULERS`], a numbered variant
/// ([`NUMBERED_VARIANTS`]), or scx_gru variants combined with `+` (`gru-wakebal2+burst8`:
/// `gru-wakebal2`'s options and `gru-burst8`'s).
fn known_scheduler(name: &str) -> bool {
    let known_part = |name: &str| {
        SCHEDULERS.contains(&name)
            || NUMBERED_VARIANTS.iter().any(|prefix| {
                name.strip_prefix(prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    };
    match name.strip_prefix("gru-") {
        Some(parts) => parts
            .split('+')
            .all(|part| !part.is_empty() && known_part(&format!("gru-{part}"))),
        None => known_part(name),
    }
}

impl Default for Args {
    fn default() -> Self {
        Self {
            rounds: 3,
            seconds: 10,
            out: None,
            schedulers: DEFAULT_SCHEDULERS.iter().map(|s| s.to_string()).collect(),
            loads: LOADS.iter().map(|s| s.to_string()).collect(),
            bpf_prog_stats: false,
            wakeup_latency: false,
            profile_scheduler: false,
            thread_samples: false,
            no_thp: false,
            from_out: None,
            io_timer_disk_us: None,
        }
    }
}

/// The options, for `--help` and the error on an unknown one.
const USAGE: &str =
    "[--rounds N] [--seconds S] [--out DIR] [--schedulers eevdf,A,B] [--loads A,B] \
    [--bpf-prog-stats] [--wakeup-latency] [--profile-scheduler] [--thread-samples] [--no-thp] \
    [--io-timer-disk US] [--from-out GUEST_OUT_DIR]";

fn parse_args() -> Result<Args> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => args.rounds = value()?.parse().context("--rounds")?,
            "--seconds" => args.seconds = value()?.parse().context("--seconds")?,
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--schedulers" => {
                args.schedulers = value()?.split(',').map(str::to_owned).collect();
            }
            "--loads" => args.loads = value()?.split(',').map(str::to_owned).collect(),
            "--bpf-prog-stats" => args.bpf_prog_stats = true,
            "--wakeup-latency" => args.wakeup_latency = true,
            "--profile-scheduler" => args.profile_scheduler = true,
            "--thread-samples" => args.thread_samples = true,
            "--no-thp" => args.no_thp = true,
            "--from-out" => args.from_out = Some(PathBuf::from(value()?)),
            "--io-timer-disk" => {
                args.io_timer_disk_us = Some(value()?.parse().context("--io-timer-disk (µs)")?)
            }
            "--help" | "-h" => {
                println!(
                    "usage: vm_compare {USAGE}\n(the module documentation in {} explains each)",
                    file!()
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} ({USAGE})"),
        }
    }
    ensure!(
        args.rounds >= 1 && args.seconds >= 1,
        "rounds and seconds must be >= 1"
    );
    for s in &args.schedulers {
        ensure!(
            known_scheduler(s),
            "unknown scheduler {s:?} (known: {}, {}, N a number; scx_gru variants combine \
             with +, e.g. gru-wakebal2+burst8)",
            SCHEDULERS.join(", "),
            NUMBERED_VARIANTS.map(|v| format!("{v}N")).join(", ")
        );
    }
    for l in &args.loads {
        ensure!(
            LOADS.contains(&l.as_str()),
            "unknown load {l:?} (known: {})",
            LOADS.join(", ")
        );
    }
    ensure!(!args.loads.is_empty(), "--loads needs at least one load");
    ensure!(
        args.schedulers.first().map(String::as_str) == Some("eevdf"),
        "--schedulers must start with eevdf (the baseline of every ratio)"
    );
    Ok(args)
}

/// The guest script's lines that make `/root/sb`, the I/O loads' folder: on the root
/// filesystem's virtio disk, or with `Some(µs)` on a 512 MiB timer disk whose I/Os complete
/// after that many µs (`asa_lab::timer_disk`; exit 5 when the guest cannot make it), its
/// device and I/O scheduler written to `io-disk.txt`.
fn io_disk_shell(timer_us: Option<u32>) -> String {
    match timer_us {
        None => "mkdir -p /root/sb\necho virtio > $out/io-disk.txt".to_owned(),
        Some(us) => format!(
            "{}\ndev=$(timer_disk /root/sb {} 512) || exit 5\n\
             echo \"timer $dev {us} us $(cat /sys/block/${{dev#/dev/}}/queue/scheduler)\" \
             > $out/io-disk.txt",
            asa_lab::timer_disk::TIMER_DISK_SH,
            u64::from(us) * 1000
        ),
    }
}

/// The report's words for the guest's `io-disk.txt` (`virtio`, or `timer DEV US us
/// [none] mq-deadline`); runs before the file existed used the virtio disk.
fn describe_io_disk(io_disk: &str) -> String {
    let words: Vec<&str> = io_disk.split_whitespace().collect();
    match words.as_slice() {
        ["timer", dev, us, "us", sched @ ..] => format!(
            "the timer disk ({dev}: RAM-backed null_blk, every I/O completes {us} µs after \
             submission on a guest timer; I/O scheduler {}), ext4",
            sched.join(" ")
        ),
        _ => "the root filesystem's virtio-blk disk (a file on the host), ext4".to_owned(),
    }
}

/// A warning for the report when the emulation scores where a load's threads sit rather than
/// how they are scheduled: the mixed load under single-threaded TCG (the lab's default, and
/// the only mode of `-icount`). Its vCPUs run in turn from vCPU 0, whose interrupts are taken
/// first: an I/O thread beside a hog did 4.7× fewer I/Os on vCPU 1 than on vCPU 0 under
/// instruction counting, the same on either under MTTCG
/// (`results/2026-11-27-lab-vcpu0-takes-interrupts-first/`).
fn accel_caveat(accel: &str, loads: &[String]) -> Option<String> {
    let single_threaded = accel.starts_with("tcg") && !accel.contains("thread=multi");
    (single_threaded && loads.iter().any(|l| l == "mixed")).then(|| {
        format!(
            "**Caveat: the mixed load under single-threaded TCG (`-accel {accel}`).** The vCPUs \
             run in turn from vCPU 0, which takes its interrupts first, so the I/O part depends \
             on which vCPU holds the I/O threads (results/2026-11-27-lab-vcpu0-takes-interrupts-first/): \
             read the parts' ratios as placement, compare the load by its \"mixed (both parts)\" \
             row, or run it with {}=multi (equal vCPUs, real-time scatter).",
            asa_lab::vm::TCG_THREAD_ENV
        )
    })
}

/// The guest script for `args`' schedulers, rounds, seconds, loads and BPF program stats.
fn guest_script(args: &Args) -> String {
    let schedulers = &args.schedulers;
    let mut body = String::new();
    for r in 1..=args.rounds {
        for i in 0..schedulers.len() {
            let s = &schedulers[(i + r as usize - 1) % schedulers.len()];
            body.push_str(&format!("start {s} {r}\nloads {s} {r}\nstop {s} {r}\n"));
        }
    }
    SCRIPT
        .replace("__SECONDS__", &args.seconds.to_string())
        .replace("__LOADS__", &args.loads.join(" "))
        .replace("__IO_DISK__", &io_disk_shell(args.io_timer_disk_us))
        .replace("__BPF_STATS__", if args.bpf_prog_stats { "1" } else { "0" })
        .replace("__THREADS__", if args.thread_samples { "1" } else { "0" })
        .replace("__NO_THP__", if args.no_thp { "1" } else { "0" })
        .replace("__SCHEDSTAT__", schedstat::SNAPSHOT_SHELL)
        .replace(
            "__RECORD__",
            &latency::RECORD_SHELL.replace("__LAT__", if args.wakeup_latency { "1" } else { "0" }),
        )
        .replace(
            "__PROFILE__",
            &profile::PROFILE_SHELL
                .replace("__PROF__", if args.profile_scheduler { "1" } else { "0" }),
        )
        .replace("__ROUNDS__", &body)
}

/// The two snapshots `PREFIX-SCHED-ROUND-LOAD-{0,1}.EXT` the guest took before and after a
/// load, or None with a warning that the load's `what` is left out: the load's own numbers
/// stand (a stats-file copy went missing once; older out folders lack newer snapshots).
fn snapshot_pair(
    outcome: &VmOutcome,
    [sched, round, load]: [&str; 3],
    prefix: &str,
    ext: &str,
    what: &str,
) -> Option<(String, String)> {
    let snap = |i: u32| outcome.read_out(&format!("{prefix}-{sched}-{round}-{load}-{i}.{ext}"));
    match (snap(0), snap(1)) {
        (Ok(before), Ok(after)) => Some((before, after)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("warning: {sched}/{round}/{load}: no {what}: {e:#}");
            None
        }
    }
}

/// Read every measured run; fails on a failed load or a scheduler that was not attached for
/// the whole of its loads.
fn collect(outcome: &VmOutcome, args: &Args) -> Result<Vec<Run>> {
    let runs_txt = outcome.read_out("runs.txt")?;
    let clk_tck: f64 = outcome
        .read_out("clk_tck.txt")?
        .trim()
        .parse()
        .context("clk_tck.txt")?;
    let mut runs = Vec::new();
    for line in runs_txt.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let Some(rest) = line.strip_prefix("# ") {
            // "# start|end SCHED ROUND STATE [OPS]"
            let g: Vec<&str> = rest.split_whitespace().collect();
            ensure!(g.len() >= 4, "bad runs.txt line {line:?}");
            let (sched, state) = (g[1], g[3]);
            let want = if sched == "eevdf" {
                "disabled"
            } else {
                "enabled"
            };
            ensure!(
                state == want,
                "{sched} round {}: sched_ext was {state} at {} of its loads (want {want}): {line:?}",
                g[2],
                g[0]
            );
            if sched != "eevdf" {
                let prefix = match sched {
                    "bpfland" | "floor" => sched,
                    _ => "gru",
                };
                ensure!(
                    g.get(4).is_some_and(|ops| ops.starts_with(prefix)),
                    "{sched}: ops is not {prefix}: {line:?}"
                );
            }
            println!("{line}");
            continue;
        }
        ensure!(f.len() == 8, "bad runs.txt line {line:?}");
        let (sched, round, load, rc) = (f[0], f[1], f[2], f[3]);
        let file = |name: &str| outcome.read_out(&format!("load-{sched}-{round}-{name}.txt"));
        if rc != "0" {
            bail!(
                "{sched}/{round}/{load} failed with status {rc}: {}",
                file(load)?
            );
        }
        // (With --from-out, --loads picks some of the loads the run measured.)
        if sched == "warmup" || !args.loads.iter().any(|l| l == load) {
            continue;
        }
        let perf = outcome.read_out(&format!("perf-{sched}-{round}-{load}.txt"))?;
        let snapshots = |prefix: &str, ext: &str, what: &str| {
            snapshot_pair(outcome, [sched, round, load], prefix, ext, what)
        };
        let waits = if sched.starts_with("gru") {
            snapshots("st", "json", "queue waits")
                .map(|(before, after)| {
                    Waits::between(&before, &after)
                        .with_context(|| format!("{sched}/{round}/{load}: scx_gru's queue waits"))
                })
                .transpose()?
        } else {
            None
        };
        // (A guest out folder from before the schedstat snapshots, read with --from-out, has none.)
        let delays = snapshots("ss", "txt", "run-queue waits")
            .map(|(before, after)| {
                LoadDelays::between(&before, &after)
                    .with_context(|| format!("{sched}/{round}/{load}: schedstat"))
            })
            .transpose()?;
        let wake = if args.wakeup_latency {
            let (start, end) =
                latency::span(&outcome.read_out(&format!("lat-{sched}-{round}-{load}.span"))?)?;
            let csv = outcome.read_out(&format!("lat-{sched}-{round}-{load}.csv"))?;
            Some(
                latency::from_record(&csv, start, end)
                    .with_context(|| format!("{sched}/{round}/{load}: wakeup latency"))?,
            )
        } else {
            None
        };
        let bpf_ops = if args.bpf_prog_stats {
            let dump = |i: u32| outcome.read_out(&format!("bpf-{sched}-{round}-{load}-{i}.json"));
            bpf_op_deltas(&dump(0)?, &dump(1)?)
                .with_context(|| format!("{sched}/{round}/{load}: BPF program stats"))?
        } else {
            BTreeMap::new()
        };
        let profile = if args.profile_scheduler && sched != "eevdf" {
            let report = outcome.read_out(&format!("prof-{sched}-{round}-{load}.txt"))?;
            profile::parse_report(&report)
                .with_context(|| format!("{sched}/{round}/{load}: perf report"))?
        } else {
            BTreeMap::new()
        };
        let base = Run {
            scheduler: sched.to_owned(),
            round: round.parse()?,
            context_switches: perf_counter(&perf, "context-switches"),
            migrations: perf_counter(&perf, "cpu-migrations"),
            wall_s: f[5].parse::<f64>()? - f[4].parse::<f64>()?,
            sched_cpu_s: (sched != "eevdf")
                .then(|| -> Result<f64> {
                    Ok((f[7].parse::<f64>()? - f[6].parse::<f64>()?) / clk_tck)
                })
                .transpose()?,
            bpf_ops,
            profile,
            waits,
            delays,
            wake,
            ..Run::default()
        };
        let parts: Vec<(&str, String)> = match load {
            "mixed" => vec![
                ("mixed-cpu", file("mixed-cpu")?),
                ("mixed-io", file("mixed-io")?),
            ],
            _ => vec![(load, file(load)?)],
        };
        for (row, text) in parts {
            let mut run = Run {
                row: row.to_owned(),
                ..base.clone()
            };
            if row == "hackbench" {
                run.hackbench_s = Some(
                    parse_hackbench(&text)
                        .with_context(|| format!("no hackbench time in {text:?}"))?,
                );
            } else {
                run.sysbench =
                    Some(parse_sysbench(&text).with_context(|| {
                        format!("{sched}/{row}: no sysbench report in {text:?}")
                    })?);
            }
            runs.push(run);
        }
    }
    Ok(runs)
}

/// A table cell: `a / b` with two decimals, or "-" without both or with `b` not positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// A table cell: the value with `digits` decimals, or "-".
fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// Throughput ratios to `baseline` (EEVDF for the target) within each round (the same round's
/// baseline run), and their geometric mean: a round that ran slower as a whole (the host busy,
/// the disk's state) moves every scheduler's ratio less than the medians of the raw values.
/// Yields, per row and scheduler other than EEVDF and the baseline, (geometric mean, the
/// per-round ratios in round order).
fn round_ratios(
    schedulers: &[String],
    runs: &[Run],
    baseline: &str,
) -> Vec<(String, String, f64, Vec<f64>)> {
    // A run's throughput ÷ the baseline's in the same row and round.
    let ratio = |r: &Run| -> Option<f64> {
        let base = runs
            .iter()
            .find(|b| b.scheduler == baseline && b.row == r.row && b.round == r.round)?
            .throughput()?;
        (base > 0.0)
            .then(|| r.throughput().map(|t| t / base))
            .flatten()
            .filter(|ratio| *ratio > 0.0)
    };
    let mut out = Vec::new();
    for row in ROWS.iter().copied().chain([MIXED_BOTH]) {
        for sched in schedulers
            .iter()
            .filter(|s| *s != "eevdf" && *s != baseline)
        {
            let ratios: Vec<f64> = if row == MIXED_BOTH {
                // Per round, the geometric mean of the two parts' ratios.
                runs.iter()
                    .filter(|r| &r.scheduler == sched && r.row == "mixed-cpu")
                    .filter_map(|cpu| {
                        let io = runs.iter().find(|r| {
                            &r.scheduler == sched && r.row == "mixed-io" && r.round == cpu.round
                        })?;
                        Some((ratio(cpu)? * ratio(io)?).sqrt())
                    })
                    .collect()
            } else {
                runs.iter()
                    .filter(|r| &r.scheduler == sched && r.row == row)
                    .filter_map(ratio)
                    .collect()
            };
            if ratios.is_empty() {
                continue;
            }
            let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
            out.push((row.to_string(), sched.clone(), geo, ratios));
        }
    }
    out
}

/// The mixed load as a whole in [`round_ratios`]: per round, the geometric mean of its CPU
/// part's and its I/O part's ratios, so each part counts alike and CPU time moved from one part
/// to the other at EEVDF's rate leaves it unchanged. Under single-threaded TCG the parts follow
/// where the I/O threads sit (vCPU 1's interrupts come late): across EEVDF's rounds in one run
/// each part moved by up to ±12 % and this by ±2 %
/// (`results/2026-11-27-lab-vcpu0-takes-interrupts-first/`).
const MIXED_BOTH: &str = "mixed (both parts)";

/// Issue 7's throughput target: at least this fraction of EEVDF's (within 3 %).
const THROUGHPUT_FLOOR: f64 = 0.97;

/// [`round_ratios`] as a table, with the geometric mean's 95 % confidence interval and what it
/// says about [`THROUGHPUT_FLOOR`] (see [`paired`]).
fn round_ratio_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = format!(
        "| load | scheduler | geometric mean | 95 % interval | ≥ {THROUGHPUT_FLOOR:.2} × EEVDF | per round |\n\
         |---|---|---|---|---|---|\n"
    );
    for (row, sched, geo, ratios) in round_ratios(schedulers, runs, "eevdf") {
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        let (interval, verdict) = match paired::geometric_ci(&ratios) {
            Some((_, low, high)) => (
                format!("{low:.2}–{high:.2}"),
                paired::verdict(low, high, THROUGHPUT_FLOOR),
            ),
            None => ("-".into(), "-"),
        };
        t.push_str(&format!(
            "| {row} | {sched} | {geo:.2} | {interval} | {verdict} | {} |\n",
            each.join(" ")
        ));
    }
    t
}

/// The scx_gru variant every other one is paired with, when it ran: the policy without a model.
const VARIANT_BASELINE: &str = "gru-fallback";

/// Every other scx_gru variant's throughput ÷ [`VARIANT_BASELINE`]'s within each round, with the
/// geometric mean's 95 % interval: what the model (or a variant's option) changes, paired in the
/// same rounds, without EEVDF's noise in between. Empty without the baseline.
fn variant_ratio_table(schedulers: &[String], runs: &[Run]) -> String {
    if !schedulers.iter().any(|s| s == VARIANT_BASELINE) {
        return String::new();
    }
    let gru_only: Vec<String> = schedulers
        .iter()
        .filter(|s| s.starts_with("gru"))
        .cloned()
        .collect();
    let rows = round_ratios(&gru_only, runs, VARIANT_BASELINE);
    if rows.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "| load | scheduler | ÷ {VARIANT_BASELINE} (geometric mean) | 95 % interval | per round |\n\
         |---|---|---|---|---|\n"
    );
    for (row, sched, geo, ratios) in rows {
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        let interval = paired::geometric_ci(&ratios)
            .map_or("-".into(), |(_, low, high)| format!("{low:.2}–{high:.2}"));
        t.push_str(&format!(
            "| {row} | {sched} | {geo:.2} | {interval} | {} |\n",
            each.join(" ")
        ));
    }
    t
}

fn table(schedulers: &[String], runs: &[Run]) -> String {
    let cell = |sched: &str, row: &str, f: &dyn Fn(&Run) -> Option<f64>| {
        median(
            runs.iter()
                .filter(|r| r.scheduler == sched && r.row == row)
                .filter_map(f)
                .collect(),
        )
    };
    let mut t = String::new();
    t.push_str("| load | scheduler | events/s (range) | lat avg / p95 / max ms | cs/s | cs / event | migr/s | wall s | sched CPU % | BPF CPU % | thr / EEVDF | cs / EEVDF | migr / EEVDF |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for row in ROWS {
        let thr = |s: &str| cell(s, row, &|r| r.throughput());
        let cs = |s: &str| cell(s, row, &|r| r.per_s(r.context_switches));
        let mig = |s: &str| cell(s, row, &|r| r.per_s(r.migrations));
        for sched in schedulers.iter().map(String::as_str) {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.scheduler == sched && r.row == row)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let thr_all: Vec<f64> = mine.iter().filter_map(|r| r.throughput()).collect();
            let (lo, hi) = thr_all
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(*v), hi.max(*v))
                });
            let throughput = if row == "hackbench" {
                // Show hackbench's own time; the ratio uses 1 / time.
                format!(
                    "{} s ({:.2}–{:.2})",
                    fmt(cell(sched, row, &|r| r.hackbench_s), 2),
                    1.0 / hi,
                    1.0 / lo
                )
            } else {
                format!("{} ({lo:.0}–{hi:.0})", fmt(thr(sched), 1))
            };
            let lat = if row == "hackbench" {
                "-".to_string()
            } else {
                format!(
                    "{} / {} / {}",
                    fmt(cell(sched, row, &|r| r.sysbench.map(|s| s.lat_avg_ms)), 2),
                    fmt(cell(sched, row, &|r| r.sysbench.map(|s| s.lat_p95_ms)), 2),
                    fmt(cell(sched, row, &|r| r.sysbench.map(|s| s.lat_max_ms)), 1),
                )
            };
            t.push_str(&format!(
                "| {row} | {sched} | {throughput} | {lat} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                fmt(cs(sched), 0),
                fmt(cell(sched, row, &|r| r.cs_per_event()), 2),
                fmt(mig(sched), 1),
                fmt(cell(sched, row, &|r| Some(r.wall_s)), 1),
                fmt(cell(sched, row, &|r| r.sched_cpu_pct()), 1),
                fmt(cell(sched, row, &|r| r.bpf_cpu_pct()), 2),
                ratio(thr(sched), thr("eevdf")),
                ratio(cs(sched), cs("eevdf")),
                ratio(mig(sched), mig("eevdf")),
            ));
        }
    }
    t
}

/// scx_gru's queue waits per load and variant: waits per second and mean wait, short-burst
/// tasks and the others (medians over rounds).
fn wait_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from(
        "| load | scheduler | short-burst waits/s | mean µs | other waits/s | mean µs |\n",
    );
    t.push_str("|---|---|---|---|---|---|\n");
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().filter(|s| s.starts_with("gru")) {
            let mine: Vec<(&Waits, f64)> = runs
                .iter()
                .filter(|r| &r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .filter_map(|r| Some((r.waits.as_ref()?, r.wall_s)))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let each = |f: &dyn Fn(&Waits, f64) -> Option<f64>| {
                median(mine.iter().filter_map(|(w, wall)| f(w, *wall)).collect())
            };
            t.push_str(&format!(
                "| {load} | {sched} | {} | {} | {} | {} |\n",
                fmt(each(&|w, wall| Some(w.short_n as f64 / wall)), 0),
                fmt(each(&|w, _| w.mean_us(true)), 1),
                fmt(each(&|w, wall| Some(w.long_n as f64 / wall)), 0),
                fmt(each(&|w, _| w.mean_us(false)), 1),
            ));
        }
    }
    t
}

/// Local timer interrupts per second on each vCPU, per I/O load, scheduler and round (from
/// the schedstat snapshots' `LOC:` line): the timer disk completes an I/O on the vCPU that
/// submitted it, so under single-threaded TCG, where vCPU 1's interrupts come late, this shows
/// which vCPU carried a round's I/O. Empty when no snapshot had the line.
fn timer_irq_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::new();
    for (row, load) in per_load_rows().filter(|(_, load)| ["io", "io8", "mixed"].contains(load)) {
        for sched in schedulers {
            let rounds: Vec<String> = runs
                .iter()
                .filter(|r| &r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .filter_map(|r| {
                    let irqs = &r.delays.as_ref()?.timer_irqs;
                    (!irqs.is_empty()).then(|| {
                        let each: Vec<String> = irqs
                            .iter()
                            .map(|n| format!("{:.0}", *n as f64 / r.wall_s))
                            .collect();
                        format!("r{} {}", r.round, each.join(" / "))
                    })
                })
                .collect();
            if !rounds.is_empty() {
                t.push_str(&format!("| {load} | {sched} | {} |\n", rounds.join(", ")));
            }
        }
    }
    if t.is_empty() {
        return t;
    }
    format!("| load | scheduler | per round: vCPU 0 / vCPU 1 |\n|---|---|---|\n{t}")
}

/// Run-queue waits of every scheduler (the kernel's schedstat), per load: how busy the CPUs
/// were (tasks' run time over the load's wall time), time slices per second and the mean wait
/// before one, for every task and for kernel threads (with their two
/// busiest groups), the waits' ratio to EEVDF's, and Jain's fairness index over sysbench's
/// threads (medians over rounds).
fn delay_table(schedulers: &[String], runs: &[Run]) -> String {
    const GROUPS: [&str; 2] = ["kworker", "ksoftirqd"];
    let mut t = String::from(
        "| load | scheduler | CPU busy % | slices/s | wait µs / slice | wait / EEVDF | \
         kthread slices/s | kthread wait µs | kworker µs | ksoftirqd µs | fairness (Jain) |\n",
    );
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    let each = |sched: &str, row: &str, f: &dyn Fn(&LoadDelays, f64) -> Option<f64>| {
        median(
            runs.iter()
                .filter(|r| r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .filter_map(|r| f(r.delays.as_ref()?, r.wall_s))
                .collect(),
        )
    };
    let mean_wait = |sched: &str, row: &str| each(sched, row, &|d, _| d.all.mean_wait_us());
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().map(String::as_str) {
            if !runs
                .iter()
                .any(|r| r.scheduler == sched && r.row == row && r.delays.is_some())
            {
                continue;
            }
            let ratio = ratio(mean_wait(sched, row), mean_wait("eevdf", row));
            let group = |g: &str| {
                fmt(
                    each(sched, row, &|d, _| d.kthread_groups.get(g)?.mean_wait_us()),
                    1,
                )
            };
            // The mixed load's fairness is its CPU part's (four threads).
            let fairness = median(
                runs.iter()
                    .filter(|r| r.scheduler == sched && r.row == row)
                    .filter_map(|r| r.sysbench?.fairness)
                    .collect(),
            );
            t.push_str(&format!(
                "| {load} | {sched} | {} | {} | {} | {ratio} | {} | {} | {} | {} | {} |\n",
                fmt(each(sched, row, &|d, wall| d.busy_pct(wall)), 1),
                fmt(
                    each(sched, row, &|d, wall| Some(d.all.slices as f64 / wall)),
                    0
                ),
                fmt(mean_wait(sched, row), 1),
                fmt(
                    each(sched, row, &|d, wall| Some(d.kthreads.slices as f64 / wall)),
                    0
                ),
                fmt(each(sched, row, &|d, _| d.kthreads.mean_wait_us()), 1),
                group(GROUPS[0]),
                group(GROUPS[1]),
                fmt(fairness, 3),
            ));
        }
    }
    t
}

/// With `--wakeup-latency`: per load and scheduler, medians over rounds of every task's
/// wakeup-to-run latency ([`latency::WakeLatency`]); the worst tick is the worst of all rounds.
fn latency_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from(
        "| load | scheduler | ticks | wake-ups/s | p50 µs | p99 µs | p99 / EEVDF | worst p99 µs |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let of = |sched: &str, row: &str| -> Vec<latency::WakeLatency> {
        runs.iter()
            .filter(|r| r.scheduler == sched && r.row == row)
            .filter_map(|r| r.wake)
            .collect()
    };
    let p99 = |sched: &str, row: &str| median(of(sched, row).iter().map(|w| w.p99_us).collect());
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().map(String::as_str) {
            let mine = of(sched, row);
            if mine.is_empty() {
                continue;
            }
            let med = |f: fn(&latency::WakeLatency) -> f64| median(mine.iter().map(f).collect());
            let p99_us = med(|w| w.p99_us);
            t.push_str(&format!(
                "| {load} | {sched} | {} | {} | {} | {} | {} | {} |\n",
                mine.iter().map(|w| w.ticks).sum::<usize>(),
                fmt(med(|w| w.wakeups_per_s), 0),
                fmt(med(|w| w.p50_us), 1),
                fmt(p99_us, 1),
                ratio(p99_us, p99("eevdf", row)),
                fmt(mine.iter().map(|w| w.p99_worst_us).reduce(f64::max), 1),
            ));
        }
    }
    t
}

/// With `--bpf-prog-stats`: per load and scheduler, each BPF op's calls per second, time per
/// call and share of one CPU (medians over rounds).
fn bpf_op_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from("| load | scheduler | op | calls/s | ns / call | CPU % |\n");
    t.push_str("|---|---|---|---|---|---|\n");
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().map(String::as_str) {
            let mine: Vec<&Run> = runs
                .iter()
                .filter(|r| r.scheduler == sched && r.row == row && r.wall_s > 0.0)
                .collect();
            let names: std::collections::BTreeSet<&String> =
                mine.iter().flat_map(|r| r.bpf_ops.keys()).collect();
            for name in names {
                let each = |f: &dyn Fn(&BpfOp, f64) -> Option<f64>| {
                    median(
                        mine.iter()
                            .filter_map(|r| f(r.bpf_ops.get(name)?, r.wall_s))
                            .collect(),
                    )
                };
                let calls = each(&|op, wall| Some(op.calls as f64 / wall));
                let ns_per_call =
                    each(&|op, _| (op.calls > 0).then(|| op.ns as f64 / op.calls as f64));
                let pct = each(&|op, wall| Some(op.ns as f64 / 1e9 / wall * 100.0));
                t.push_str(&format!(
                    "| {load} | {sched} | {name} | {} | {} | {} |\n",
                    fmt(calls, 0),
                    fmt(ns_per_call, 0),
                    fmt(pct, 2)
                ));
            }
        }
    }
    t
}

/// Symbols per load and scheduler in the `--profile-scheduler` table.
const PROFILE_TOP: usize = 12;

/// `--profile-scheduler`'s table: per load and scheduler, the samples of every round summed,
/// the [`PROFILE_TOP`] symbols with the most, with their share.
fn profile_table(schedulers: &[String], runs: &[Run]) -> String {
    let mut t = String::from("| load | scheduler | samples | symbol | samples | share % |\n");
    t.push_str("|---|---|---|---|---|---|\n");
    for (row, load) in per_load_rows() {
        for sched in schedulers.iter().filter(|s| *s != "eevdf") {
            let mut all = BTreeMap::new();
            for r in runs
                .iter()
                .filter(|r| &r.scheduler == sched && r.row == row)
            {
                profile::merge(&mut all, &r.profile);
            }
            let (total, rows) = profile::top(&all, PROFILE_TOP);
            for (symbol, n, share) in rows {
                t.push_str(&format!(
                    "| {load} | {sched} | {total} | `{}` | {n} | {share:.1} |\n",
                    symbol.replace('|', "\\|")
                ));
            }
        }
    }
    t
}

/// Under `cargo run`, builds the scx_gru binary the lab will copy into the guest: `cargo run
/// --example` builds the example only, and a stale scx_gru without a newer option never
/// attaches (it happened: run 9's first attempt). With `with_asa`, the `asa` agent too (its
/// `asa record` measures wakeup latency in the guest).
fn build_scx_gru(with_asa: bool) -> Result<()> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(()); // run directly: the caller built what it runs
    };
    let mut command = std::process::Command::new(cargo);
    command.args([
        "build",
        "-p",
        "asa-gru-expert",
        "--bin",
        "scx_gru",
        "--bin",
        "scx_floor",
    ]);
    if with_asa {
        command.args(["-p", "asa-agent", "--bin", "asa"]);
    }
    if PROFILE == "release" {
        command.arg("--release");
    }
    let status = command.status().context("run cargo build for scx_gru")?;
    ensure!(status.success(), "cargo build of scx_gru failed ({status})");
    Ok(())
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let outcome = match &args.from_out {
        Some(out_dir) => {
            ensure!(
                out_dir.join("runs.txt").is_file(),
                "{} has no runs.txt: not the out folder of a vm_compare guest",
                out_dir.display()
            );
            VmOutcome {
                exit_code: 0,
                console: String::new(),
                out_dir: out_dir.clone(),
                boot_time: None,
                wall_time: Duration::ZERO,
            }
        }
        None => run_guest(&args)?,
    };
    report(&args, &outcome)
}

/// The file in the guest out folder that names qemu's `-accel` of the run.
const ACCEL_FILE: &str = "accel.txt";
/// The file in the guest out folder with the version of the qemu that ran it.
const QEMU_FILE: &str = "qemu.txt";

/// Builds scx_gru, runs the guest script in the lab VM and checks that it finished.
fn run_guest(args: &Args) -> Result<VmOutcome> {
    build_scx_gru(args.wakeup_latency)?;
    let lab = Lab::new().context("the lab is set up (run lab/setup.sh)")?;
    let script = guest_script(args);
    let mut run = GuestRun::new("gru-compare", &script);
    // "gru" brings scx_gru with the committed model and ONNX Runtime at its default paths.
    run.experts = vec!["gru".into(), "bpfland".into()];
    // The control: the cheapest sched_ext scheduler (src/bin/scx_floor.rs).
    if args.schedulers.iter().any(|s| s == "floor") {
        run.executables.push((
            asa_lab::workspace_binary("scx_floor")?,
            PathBuf::from("/usr/local/bin/scx_floor"),
        ));
    }
    if args.wakeup_latency {
        run = run.with_asa(&asa_lab::workspace_binary("asa")?);
    }
    let mut packages = PACKAGES.to_vec();
    if args.bpf_prog_stats {
        packages.push(BPF_STATS_PACKAGE);
    }
    run.rootfs = Some(RootfsSpec::with_packages(packages));
    run.vm.timeout = vm_budget(args);
    let outcome = lab.run(&run).context("the lab VM ran")?;
    ensure!(
        outcome.exit_code == 0,
        "the guest script failed (status {}):\n{}",
        outcome.exit_code,
        outcome.script_output()
    );
    // How qemu emulated the vCPUs (ASA_LAB_TCG_THREAD, ASA_LAB_ICOUNT), for the report, also
    // with --from-out.
    std::fs::write(
        outcome.out_dir.join(ACCEL_FILE),
        asa_lab::vm::cpu_emulation()?,
    )
    .context("write the accel file")?;
    std::fs::write(
        outcome.out_dir.join(QEMU_FILE),
        asa_lab::vm::qemu_version()?,
    )
    .context("write the qemu file")?;
    println!("guest out folder: {}", outcome.out_dir.display());
    Ok(outcome)
}

/// The tables of a finished guest run, printed and, with `--out`, written with the raw files.
fn report(args: &Args, outcome: &VmOutcome) -> Result<()> {
    let runs = collect(outcome, args)?;
    let mut table = table(&args.schedulers, &runs);
    table.push_str(&format!(
        "\nThroughput / EEVDF within each round (hackbench: 1 / time), the geometric mean's 95 % \
         interval (Student's t on the log ratios) and what it says about issue 7's target of at \
         least {THROUGHPUT_FLOOR:.2} × EEVDF (met: the whole interval at or above it; missed: all \
         below; open: it straddles it); mixed (both parts): per round, the geometric mean of \
         the two parts' ratios:\n\n{}",
        round_ratio_table(&args.schedulers, &runs)
    ));
    let variants = variant_ratio_table(&args.schedulers, &runs);
    if !variants.is_empty() {
        table.push_str(&format!(
            "\nscx_gru's variants paired with the policy without a model in the same rounds \
             (throughput ratio, 95 % interval as above):\n\n{variants}"
        ));
    }
    if runs.iter().any(|r| r.delays.is_some()) {
        table.push_str(&format!(
            "\nRun-queue waits (the kernel's schedstat, any scheduler: CPU busy is the tasks' run \
             time over the CPUs' wall time, a time slice is a task starting to run, its wait the \
             time since it was queued) and Jain's fairness index over sysbench's threads:\n\n{}",
            delay_table(&args.schedulers, &runs)
        ));
    }
    let irqs = timer_irq_table(&args.schedulers, &runs);
    if !irqs.is_empty() {
        table.push_str(&format!(
            "\nLocal timer interrupts per second on each vCPU during the I/O loads (the timer \
             disk completes each I/O on the vCPU that submitted it; ~250/s more on a busy vCPU \
             are the tick):\n\n{irqs}"
        ));
    }
    if args.schedulers.iter().any(|s| s.starts_with("gru")) {
        table.push_str(&format!(
            "\nscx_gru's queue waits (runnable → running; short-burst tasks ran under 1 ms before \
             they slept and since):\n\n{}",
            wait_table(&args.schedulers, &runs)
        ));
    }
    if args.wakeup_latency {
        table.push_str(&format!(
            "\nWakeup-to-run latency of every task (`asa record`'s BPF probes on sched_wakeup and \
             sched_switch, a log2 histogram per 1 s tick, the ticks wholly inside the load; \
             medians over rounds of each run's median tick, and the worst tick of all):\n\n{}",
            latency_table(&args.schedulers, &runs)
        ));
    }
    if args.bpf_prog_stats {
        table.push_str(&format!(
            "\nBPF programs (kernel.bpf_stats_enabled, which adds two clock reads per run):\n\n{}",
            bpf_op_table(&args.schedulers, &runs)
        ));
    }
    if args.profile_scheduler {
        table.push_str(&format!(
            "\nThe scheduler's user-space process by symbol (`perf record -e cpu-clock -F 999 -p \
             PID` around every load, its threads' user and kernel samples; samples summed over \
             the rounds, the {PROFILE_TOP} symbols with the most):\n\n{}",
            profile_table(&args.schedulers, &runs)
        ));
    }
    println!("{table}");
    let snap_errors = outcome.read_out("snap-errors.txt").unwrap_or_default();
    if !snap_errors.trim().is_empty() {
        println!(
            "stats-file copies that failed in the guest:\n{}",
            snap_errors.trim_end()
        );
    }
    let versions = outcome.read_out("versions.txt").unwrap_or_default();
    let io_disk = outcome.read_out("io-disk.txt").unwrap_or_default();
    // Written by run_guest next to the guest's files (older out folders: the lab's default then).
    let accel = outcome
        .read_out(ACCEL_FILE)
        .map(|a| a.trim().to_owned())
        .unwrap_or_else(|_| asa_lab::vm::DEFAULT_TCG_ACCEL.into());
    // Out folders from before 2026-11-26 15:00 UTC ran on qemu 7.2 without recording it.
    let qemu = outcome
        .read_out(QEMU_FILE)
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|_| "7.2 (not recorded)".into());
    if accel != asa_lab::vm::DEFAULT_TCG_ACCEL {
        println!(
            "qemu ran with -accel {accel} ({})",
            asa_lab::vm::TCG_THREAD_ENV
        );
    }
    let caveat = accel_caveat(&accel, &args.loads);
    if let Some(c) = &caveat {
        println!("{c}");
    }
    let dmesg = outcome.read_out("dmesg.txt").unwrap_or_default();
    let notable: Vec<&str> = dmesg
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            [
                "timeout",
                "timed out",
                "blocked for more than",
                "reset",
                "abort",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .collect();
    println!(
        "guest kernel log: {} lines, {} about timeouts/resets/hung tasks",
        dmesg.lines().count(),
        notable.len()
    );
    for l in &notable {
        println!("  {l}");
    }
    let mut gru_stats = BTreeMap::new();
    for r in 1..=args.rounds {
        // Every scx_gru variant writes a stats file.
        for s in args.schedulers.iter().filter(|s| s.starts_with("gru")) {
            if let Ok(text) = outcome.read_out(&format!("stats-{s}-{r}.json")) {
                let v: serde_json::Value =
                    serde_json::from_str(&text).with_context(|| format!("stats-{s}-{r}.json"))?;
                gru_stats.insert(format!("{s}-{r}"), v);
            }
        }
    }
    for (k, v) in &gru_stats {
        println!(
            "{k}: mode {} predictions_applied {} fallbacks {} (prev_idle {}) select_no_idle {} wakeup_preempts {} (pinned {}, by timer {} of {} deferred) events {} (not sent: fresh {} gap {}) wakeups {} inferences {} (tasks {}) over_budget {} paused {} in {} + {} pauses moved {} ringbuf_drops {} inference p50/p99 {} / {} us",
            v["mode"], v["predictions_applied"], v["fallbacks"], v["bpf"]["nr_pred_prev_idle"],
            v["bpf"]["nr_select_no_idle"],
            v["bpf"]["nr_wakeup_preempts"],
            v["bpf"]["nr_pinned_preempts"],
            v["bpf"]["nr_timer_preempts"],
            v["bpf"]["nr_deferred_preempts"],
            v["bpf"]["nr_events"], v["bpf"]["nr_events_fresh"], v["bpf"]["nr_events_gap"],
            v["bpf"]["nr_ringbuf_wakeups"], v["user"]["inferences"], v["user"]["tasks_predicted"],
            v["user"]["inferences_over_budget"], v["user"]["inferences_paused"],
            v["user"]["inference_pauses"], v["user"]["inference_pauses_redundant"],
            v["bpf"]["nr_pred_moved"], v["ringbuf_drops"],
            v["user"]["inference_us_p50"], v["user"]["inference_us_p99"]
        );
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let md = format!(
            "# vm_compare: {} (lab VM)\n\n\
             `cargo run -p asa-gru-expert --example vm_compare -- --rounds {} --seconds {} \
             --schedulers {}{}{}{}`; medians over {} rounds (order rotated per round), ratios to EEVDF. \
             qemu {} `-accel {}`, 2 vCPUs, 2 GiB. scx_gru: {} build.\n\nGuest: {}\n\nI/O loads' disk: \
             {}\n\n{}{table}",
            args.schedulers.join(" vs "),
            args.rounds,
            args.seconds,
            args.schedulers.join(","),
            if args.loads.len() < LOADS.len() {
                format!(" --loads {}", args.loads.join(","))
            } else {
                String::new()
            },
            [
                (args.bpf_prog_stats, " --bpf-prog-stats"),
                (args.wakeup_latency, " --wakeup-latency"),
                (args.profile_scheduler, " --profile-scheduler"),
                (args.thread_samples, " --thread-samples"),
                (args.no_thp, " --no-thp"),
            ]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, flag)| *flag)
            .collect::<String>(),
            args.io_timer_disk_us
                .map(|us| format!(" --io-timer-disk {us}"))
                .unwrap_or_default(),
            args.rounds,
            qemu,
            accel,
            PROFILE,
            versions.lines().collect::<Vec<_>>().join(", "),
            describe_io_disk(&io_disk),
            caveat.map(|c| format!("{c}\n\n")).unwrap_or_default()
        );
        std::fs::write(dir.join("table.md"), md)?;
        let json = serde_json::json!({
            "rounds": args.rounds, "seconds": args.seconds, "versions": versions,
            "io_disk": io_disk.trim(),
            "runs": runs, "gru_stats": gru_stats,
        });
        std::fs::write(dir.join("runs.json"), serde_json::to_string_pretty(&json)?)?;
        let copy = |name: &str| std::fs::copy(outcome.out_dir.join(name), dir.join(name));
        copy("runs.txt").context("copying runs.txt")?;
        if !dmesg.is_empty() {
            std::fs::write(dir.join("dmesg.txt"), &dmesg)?;
        }
        println!("written to {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: &str = "CPU speed:\n    events per second:   287.66\n\n\
        General statistics:\n    total time:                          10.0025s\n\
        \x20   total number of events:              2878\n\n\
        Latency (ms):\n         min:                                    2.91\n\
        \x20        avg:                                    3.47\n\
        \x20        max:                                   41.08\n\
        \x20        95th percentile:                        4.82\n\
        \x20        sum:                                 9988.20\n";

    #[test]
    fn parses_sysbench_hackbench_and_perf() {
        let s = parse_sysbench(CPU).unwrap();
        assert!((s.events_per_s - 2878.0 / 10.0025).abs() < 1e-9, "{s:?}");
        assert_eq!(
            (s.lat_avg_ms, s.lat_p95_ms, s.lat_max_ms),
            (3.47, 4.82, 41.08)
        );
        assert!(parse_sysbench("FATAL: no such test").is_none());
        // Jain's index: events 80 and 120 on two threads are avg 100, stddev 20 (population),
        // (200)² / (2 · (80² + 120²)) = 1 / (1 + 0.2²).
        assert_eq!(s.fairness, None, "this report has no fairness lines");
        let fair = format!(
            "{CPU}\nThreads fairness:\n    events (avg/stddev):           100.0000/20.00\n\
             \x20   execution time (avg/stddev):   9.9/0.01\n"
        );
        let jain = parse_sysbench(&fair).unwrap().fairness.unwrap();
        assert!(
            (jain - 40_000.0 / (2.0 * (6_400.0 + 14_400.0))).abs() < 1e-12,
            "{jain}"
        );
        assert_eq!(
            jain_fairness("    events (avg/stddev):           1742.0000/0.00"),
            Some(1.0)
        );
        assert_eq!(
            jain_fairness("    events (avg/stddev):    0.0000/0.00"),
            None
        );
        assert_eq!(
            parse_hackbench("Running in process mode with 4 groups\nTime: 2.345\n"),
            Some(2.345)
        );
        assert_eq!(
            perf_counter(
                "83,,context-switches,2063609346,100.00,,\n5,,cpu-migrations,1,100.00,,",
                "cpu-migrations"
            ),
            Some(5.0)
        );
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn ratios_are_paired_within_rounds() {
        let run = |scheduler: &str, round: u32, events_per_s: f64| Run {
            scheduler: scheduler.into(),
            round,
            row: "io8".into(),
            sysbench: Some(Sysbench {
                events_per_s,
                ..Sysbench::default()
            }),
            ..Run::default()
        };
        // Round 2 ran slower as a whole; gru is at 0.8 and 0.5 of EEVDF's round.
        let runs = vec![
            run("eevdf", 1, 1000.0),
            run("gru", 1, 800.0),
            run("eevdf", 2, 400.0),
            run("gru", 2, 200.0),
            run("bpfland", 2, 500.0),
        ];
        let schedulers: Vec<String> = ["eevdf", "gru", "bpfland"].map(String::from).to_vec();
        let ratios = round_ratios(&schedulers, &runs, "eevdf");
        assert_eq!(ratios.len(), 2, "{ratios:?}");
        let (row, sched, geo, each) = &ratios[0];
        assert_eq!((row.as_str(), sched.as_str()), ("io8", "gru"));
        assert_eq!(each, &vec![0.8, 0.5]);
        assert!((geo - 0.4f64.sqrt()).abs() < 1e-12, "{geo}");
        assert_eq!(ratios[1].3, vec![1.25]);
        assert!(round_ratio_table(&schedulers, &runs)
            .contains("| io8 | gru | 0.63 | 0.03–12.53 | open | 0.80 0.50 |"));
        assert_eq!(
            variant_ratio_table(&schedulers, &runs),
            "",
            "no gru-fallback, no variant table"
        );

        // gru ÷ gru-fallback within rounds: 800 / 1000, 200 / 250; EEVDF and bpfland left out.
        let mut with_fallback = runs.clone();
        with_fallback.push(run("gru-fallback", 1, 1000.0));
        with_fallback.push(run("gru-fallback", 2, 250.0));
        let schedulers: Vec<String> = ["eevdf", "gru", "gru-fallback", "bpfland"]
            .map(String::from)
            .to_vec();
        let variants = variant_ratio_table(&schedulers, &with_fallback);
        assert!(
            variants.contains("| io8 | gru | 0.80 | 0.80–0.80 | 0.80 0.80 |"),
            "{variants}"
        );
        assert!(!variants.contains("bpfland") && !variants.contains("| eevdf"));
    }

    #[test]
    fn the_mixed_load_as_a_whole_is_the_geometric_mean_of_its_parts() {
        let run = |scheduler: &str, round: u32, row: &str, events_per_s: f64| Run {
            scheduler: scheduler.into(),
            round,
            row: row.into(),
            sysbench: Some(Sysbench {
                events_per_s,
                ..Sysbench::default()
            }),
            ..Run::default()
        };
        // Round 1: gru moves CPU to the I/O part (0.8 and 1.25: 1.0 as a whole); round 2: it
        // loses on both (0.9 and 0.9). Round 3 has no I/O part for gru and gives no whole.
        let runs = vec![
            run("eevdf", 1, "mixed-cpu", 100.0),
            run("eevdf", 1, "mixed-io", 3000.0),
            run("gru", 1, "mixed-cpu", 80.0),
            run("gru", 1, "mixed-io", 3750.0),
            run("eevdf", 2, "mixed-cpu", 100.0),
            run("eevdf", 2, "mixed-io", 2000.0),
            run("gru", 2, "mixed-cpu", 90.0),
            run("gru", 2, "mixed-io", 1800.0),
            run("eevdf", 3, "mixed-cpu", 100.0),
            run("eevdf", 3, "mixed-io", 2000.0),
            run("gru", 3, "mixed-cpu", 50.0),
        ];
        let schedulers: Vec<String> = ["eevdf", "gru"].map(String::from).to_vec();
        let ratios = round_ratios(&schedulers, &runs, "eevdf");
        let rows: Vec<&str> = ratios.iter().map(|(row, ..)| row.as_str()).collect();
        assert_eq!(rows, ["mixed-cpu", "mixed-io", MIXED_BOTH]);
        let whole = &ratios[2].3;
        assert_eq!(whole.len(), 2, "{whole:?}");
        assert!(
            (whole[0] - 1.0).abs() < 1e-12 && (whole[1] - 0.9).abs() < 1e-12,
            "{whole:?}"
        );
        assert!(
            round_ratio_table(&schedulers, &runs).contains("| mixed (both parts) | gru | 0.95 |")
        );
    }

    #[test]
    fn timer_interrupts_are_listed_per_round_for_the_io_loads() {
        let run = |row: &str, round: u32, irqs: Vec<u64>| Run {
            scheduler: "eevdf".into(),
            round,
            row: row.into(),
            wall_s: 10.0,
            delays: Some(LoadDelays {
                timer_irqs: irqs,
                ..LoadDelays::default()
            }),
            ..Run::default()
        };
        let schedulers = vec!["eevdf".to_string()];
        let runs = vec![
            run("mixed-cpu", 1, vec![21_000, 6_700]),
            run("mixed-io", 1, vec![21_000, 6_700]),
            run("mixed-cpu", 2, vec![9_000, 13_000]),
            run("cpu1", 1, vec![2_500, 10]),
        ];
        let t = timer_irq_table(&schedulers, &runs);
        assert!(
            t.contains("| mixed | eevdf | r1 2100 / 670, r2 900 / 1300 |"),
            "{t}"
        );
        assert!(!t.contains("cpu1"), "{t}");
        let without: Vec<Run> = runs
            .iter()
            .cloned()
            .map(|mut r| {
                r.delays = None;
                r
            })
            .collect();
        assert_eq!(timer_irq_table(&schedulers, &without), "");
    }

    #[test]
    fn context_switches_per_event_only_for_single_sysbench_loads() {
        let io = Run {
            row: "io".into(),
            sysbench: Some(Sysbench {
                events_per_s: 4000.0,
                ..Sysbench::default()
            }),
            context_switches: Some(84_000.0),
            wall_s: 10.0,
            ..Run::default()
        };
        // 8400 switches/s over 4000 I/Os/s.
        assert_eq!(io.cs_per_event(), Some(2.1));
        // The mixed load's switches belong to both parts; hackbench has no events.
        let mixed = Run {
            row: "mixed-io".into(),
            ..io.clone()
        };
        assert_eq!(mixed.cs_per_event(), None);
        let hackbench = Run {
            row: "hackbench".into(),
            sysbench: None,
            hackbench_s: Some(2.0),
            ..io.clone()
        };
        assert_eq!(hackbench.cs_per_event(), None);
        let no_perf = Run {
            context_switches: None,
            ..io
        };
        assert_eq!(no_perf.cs_per_event(), None);
    }

    #[test]
    fn bpf_op_deltas_are_per_struct_ops_program() {
        let before = r#"[{"id":7,"type":"struct_ops","name":"gru_enqueue","run_time_ns":1000,"run_cnt":10},
            {"id":8,"type":"struct_ops","name":"gru_running"},
            {"id":3,"type":"tracing","name":"other","run_time_ns":5,"run_cnt":1}]"#;
        let after = r#"[{"id":7,"type":"struct_ops","name":"gru_enqueue","run_time_ns":4000,"run_cnt":25},
            {"id":8,"type":"struct_ops","name":"gru_running","run_time_ns":600,"run_cnt":3},
            {"id":9,"type":"struct_ops","name":"gru_stopping","run_time_ns":90,"run_cnt":2},
            {"id":3,"type":"tracing","name":"other","run_time_ns":500,"run_cnt":9}]"#;
        let ops = bpf_op_deltas(before, after).unwrap();
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(
            ops["gru_enqueue"],
            BpfOp {
                calls: 15,
                ns: 3000
            }
        );
        assert_eq!(ops["gru_running"], BpfOp { calls: 3, ns: 600 });
        assert_eq!(ops["gru_stopping"], BpfOp { calls: 2, ns: 90 });
        let run = Run {
            wall_s: 2.0,
            bpf_ops: ops,
            ..Run::default()
        };
        // 3690 ns over 2 s.
        assert!((run.bpf_cpu_pct().unwrap() - 3690e-9 / 2.0 * 100.0).abs() < 1e-12);
        assert!(Run::default().bpf_cpu_pct().is_none());
        assert!(bpf_op_deltas("Error: no BTF", after).is_err());
    }

    #[test]
    fn waits_are_the_difference_of_two_stats_files() {
        let file = |n: u64, ns: u64| {
            format!(
                r#"{{"bpf":{{"nr_waits_short":{n},"wait_ns_short":{ns},"nr_waits_long":2,"wait_ns_long":9000}}}}"#
            )
        };
        let w = Waits::between(&file(10, 5_000), &file(14, 25_000)).unwrap();
        assert_eq!(
            w,
            Waits {
                short_n: 4,
                short_ns: 20_000,
                long_n: 0,
                long_ns: 0
            }
        );
        assert_eq!(w.mean_us(true), Some(5.0));
        assert_eq!(w.mean_us(false), None);
        // A stats file from before the wait counters is an error, not zeros.
        assert!(Waits::between(r#"{"bpf":{}}"#, &file(1, 1)).is_err());
    }

    #[test]
    fn the_report_names_the_io_disk() {
        let timer = describe_io_disk("timer /dev/asa0 100 us [none] mq-deadline\n");
        assert!(
            timer.contains("/dev/asa0") && timer.contains("100 µs") && timer.contains("[none]"),
            "{timer}"
        );
        // Runs from before the file, and the virtio disk.
        assert!(describe_io_disk("").contains("virtio-blk"));
        assert!(describe_io_disk("virtio\n").contains("virtio-blk"));
    }

    #[test]
    fn the_mixed_load_under_single_threaded_tcg_gets_a_caveat() {
        let loads = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let icount = "tcg,thread=single -icount shift=2,sleep=off";
        let caveat = accel_caveat(icount, &loads(&["cpu1", "mixed"])).expect("a caveat");
        assert!(
            caveat.contains(icount) && caveat.contains("=multi"),
            "{caveat}"
        );
        assert!(accel_caveat(asa_lab::vm::DEFAULT_TCG_ACCEL, &loads(&["mixed"])).is_some());
        assert_eq!(accel_caveat("tcg,thread=multi", &loads(&["mixed"])), None);
        assert_eq!(accel_caveat("kvm", &loads(&["mixed"])), None, "not TCG");
        assert_eq!(
            accel_caveat(icount, &loads(&["cpu1", "io8", "hackbench"])),
            None
        );
    }

    #[test]
    fn rounds_rotate_the_order() {
        let args = Args {
            rounds: 2,
            seconds: 5,
            ..Args::default()
        };
        let s = guest_script(&args);
        assert!(s.contains("S=5\n"));
        assert!(s.contains("BPF_STATS=0\n"));
        let profiled = Args {
            bpf_prog_stats: true,
            ..Args::default()
        };
        assert!(guest_script(&profiled).contains("BPF_STATS=1\n"));
        assert!(
            s.contains("PROF=0\n") && !s.contains("__"),
            "every placeholder filled"
        );
        let perf = Args {
            profile_scheduler: true,
            ..Args::default()
        };
        assert!(guest_script(&perf).contains("PROF=1\n"));
        assert!(s.contains("THREADS=0\n"));
        let sampled = Args {
            thread_samples: true,
            ..Args::default()
        };
        assert!(guest_script(&sampled).contains("THREADS=1\n"));
        assert!(s.contains("if [ 0 = 1 ]; then\n  echo never"));
        let no_thp = Args {
            no_thp: true,
            ..Args::default()
        };
        assert!(guest_script(&no_thp).contains("if [ 1 = 1 ]; then\n  echo never"));
        // The I/O loads' folder: on the root filesystem, or on a timer disk of 150 µs.
        assert!(s.contains("mkdir -p /root/sb\necho virtio > $out/io-disk.txt\ncd /root/sb\n"));
        let timer = guest_script(&Args {
            io_timer_disk_us: Some(150),
            ..Args::default()
        });
        assert!(
            timer.contains("timer_disk() {")
                && timer.contains("dev=$(timer_disk /root/sb 150000 512) || exit 5\n")
                && !timer.contains("mkdir -p /root/sb\n")
                && !timer.contains("__"),
            "{timer}"
        );
        let starts: Vec<&str> = s.lines().filter(|l| l.starts_with("start ")).collect();
        assert_eq!(starts[0], "start eevdf 1");
        assert_eq!(starts[4], "start gru 2");
        assert_eq!(starts.len(), 8);
    }

    /// The guest script's load filter, run by a real shell: `io` is not `io8`, every load
    /// by default.
    #[test]
    fn loads_filter_in_the_guest_shell() {
        let picked = |loads: &[&str]| -> Vec<String> {
            let script = guest_script(&Args {
                loads: loads.iter().map(|l| l.to_string()).collect(),
                ..Args::default()
            });
            let filter: String = script
                .lines()
                .filter(|l| l.starts_with("LOADS=") || l.starts_with("want()"))
                .map(|l| format!("{l}\n"))
                .collect();
            let probe: String = LOADS
                .iter()
                .map(|l| format!("want {l} && echo {l}\n"))
                .collect();
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("{filter}{probe}")])
                .output()
                .unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(picked(&["io"]), ["io"]);
        assert_eq!(picked(&["io8", "hackbench"]), ["io8", "hackbench"]);
        assert_eq!(picked(&LOADS), LOADS);
    }

    #[test]
    fn preempt_variants_take_any_minimum_run() {
        for ok in [
            "eevdf",
            "gru",
            "gru-preempt",
            "gru-preempt0",
            "gru-preempt120",
            "gru-affinity1000",
            "gru-budget2",
            "gru-wakebal2+burst8",
            "gru-wakebal2+burst+nowake",
        ] {
            assert!(known_scheduler(ok), "{ok}");
        }
        for bad in [
            "gru-preempt-5",
            "gru-preempt1x",
            "gru-preemptx",
            "gru-affinity",
            "cfs",
            "gru-wakebal2+",
            "gru-+burst8",
            "gru-wakebal2+cfs",
            "gru-wakebal2+gru-burst8",
            "eevdf+gru",
        ] {
            assert!(!known_scheduler(bad), "{bad}");
        }
        // The guest script has a case for each numbered variant.
        let script = guest_script(&Args {
            schedulers: vec!["eevdf".into()],
            ..Args::default()
        });
        for variant in NUMBERED_VARIANTS {
            assert!(
                script.contains(&format!("    {variant}[0-9]*) echo --")),
                "{variant}"
            );
        }
        assert!(script.contains("gru-preempt[0-9]*) echo --preempt-min-run-us ${1#gru-preempt} ;;"));
    }

    #[test]
    fn combined_variants_start_scx_gru_with_every_part_s_options() {
        let script = guest_script(&Args {
            schedulers: vec!["eevdf".into()],
            ..Args::default()
        });
        let from = script.find("gru_flags() {").unwrap();
        let functions = &script[from..from + script[from..].find("\nstop() {").unwrap()];
        let out = std::env::temp_dir().join(format!("vm-compare-start-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let start = |name: &str| {
            // The guest's `gru` and state helpers stubbed: print what scx_gru would be given.
            let shell = format!(
                "out={}\n{functions}\ngru() {{ echo \"$@\"; P=; }}\nstate() {{ :; }}\n\
                 start {name} 1",
                out.display()
            );
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(&shell)
                .output()
                .unwrap();
            (
                output.status.success(),
                String::from_utf8_lossy(&output.stdout)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        };
        assert_eq!(start("gru"), (true, "gru 1".into()));
        assert_eq!(
            start("gru-burst8"),
            (true, "gru-burst8 1 --burst-cap-ms 8".into())
        );
        assert_eq!(
            start("gru-burst40"),
            (true, "gru-burst40 1 --burst-cap-ms 40".into())
        );
        assert_eq!(
            start("gru-wakebal2+burst8"),
            (
                true,
                "gru-wakebal2+burst8 1 --wake-balance 2 --burst-cap-ms 8".into()
            )
        );
        assert_eq!(
            start("gru-nowake+preempt0+fallback"),
            (
                true,
                "gru-nowake+preempt0+fallback 1 --no-wake-queues --preempt-min-run-us 0 --no-model"
                    .into()
            )
        );
        assert!(!start("gru-wakebal2+cfs").0, "an unknown part fails");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn the_vm_budget_grows_with_loads_schedulers_and_rounds() {
        let args = Args::default(); // 6 loads, 4 schedulers, 3 rounds (+ warm-up), 10 s
        assert_eq!(vm_budget(&args), Duration::from_secs(60 * 6 * 4 * 4 + 300));
        let one = Args {
            loads: vec!["mixed".into()],
            schedulers: vec!["eevdf".into(), "gru".into()],
            rounds: 1,
            ..Args::default()
        };
        assert_eq!(vm_budget(&one), Duration::from_secs(60 * 2 * 2 + 300));
    }
}

//! scx_gru: GRU_sched as a sched_ext scheduler (see README.md). The options, and `main`:
//! `--help-stats`, `--monitor` and `--check-model` answer and exit; otherwise the scheduler
//! ([`scheduler::Scheduler`]) runs, again each time the kernel asks for a restart, until
//! SIGINT or SIGTERM (with `--bpf-model`, SIGHUP swaps the in-BPF model). An error is logged
//! as one line and exits with status 1.

mod scheduler;

use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use log::{error, info, warn};

use asa_gru_expert::metrics;
use scheduler::{describe, load_mode, Mode, Scheduler};

/// GRU_sched: places tasks on the CPU a GRU predicts from their last events,
/// falling back to idle-CPU selection and a shared vtime queue.
#[derive(Debug, Parser)]
#[command(version)]
pub struct Opts {
    /// Model metadata (TOML, schema asa.gru-model v2) next to its ONNX file
    /// [default: /usr/local/share/scx_gru/gru.toml if it exists].
    /// Without a model scx_gru runs in fallback-only mode.
    #[arg(long, env = "GRU_MODEL")]
    model: Option<PathBuf>,

    /// ONNX Runtime shared library, libonnxruntime.so.1.x [default:
    /// /usr/local/lib/scx_gru/libonnxruntime.so, else the one setup_ort.sh cached, if present].
    #[arg(long, env = "ORT_DYLIB_PATH")]
    ort_lib: Option<PathBuf>,

    /// Run without a model even if one is installed (fallback-only mode).
    #[arg(long)]
    no_model: bool,

    /// In-BPF placement model (an asa.gru-mlp v1 file, e.g. gru_expert/model/mlp.json; off by
    /// default): select_cpu itself evaluates this fixed-point MLP on the waking task's state
    /// and places the task on the CPU it picks when that CPU is idle, with no user-space step
    /// (else the default policy). The user-space GRU is then not loaded (no ONNX Runtime, no
    /// events, no inference): the two cannot run together, hence not with --model. The file
    /// is checked (schema, version, shape, value bounds, at most this machine's CPUs) before
    /// scx_gru attaches: an error exits without attaching. SIGHUP re-reads the file and swaps
    /// the new model in at once; one that fails the checks is refused with a log line, and
    /// the model in use keeps deciding.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model", "observe_only"])]
    bpf_model: Option<PathBuf>,

    /// Time slice in microseconds (the longest one when --slice-min-us shrinks it).
    #[arg(long, default_value_t = 5000)]
    slice_us: u64,

    /// Shortest slice, in microseconds: the slice shrinks with the number of tasks waiting in
    /// the shared DSQ, slice / (waiting + 1), down to this (0: a fixed slice).
    #[arg(long, default_value_t = 500)]
    slice_min_us: u64,

    /// A prediction older than this many milliseconds is ignored by the BPF side.
    #[arg(long, default_value_t = 500)]
    prediction_ttl_ms: u64,

    /// Do not predict again for a task within this many milliseconds.
    #[arg(long, default_value_t = 20)]
    repredict_ms: u64,

    /// The BPF side sends at most one event per task within this many milliseconds.
    #[arg(long, default_value_t = 10)]
    event_gap_ms: u64,

    /// The BPF side sends no event for a task whose prediction is younger than this many
    /// milliseconds (below the TTL, so the prediction is refreshed before it goes stale).
    #[arg(long, default_value_t = 250)]
    event_refresh_ms: u64,

    /// Share of one CPU (percent) the inference thread may use; inferences
    /// beyond it are skipped until the next second (their tasks fall back).
    #[arg(long, default_value_t = 5.0)]
    inference_budget_pct: f64,

    /// Pause inference while fewer than this percent of the usable predictions (fresh, allowed)
    /// could be followed because their CPU was busy, measured over 250 ms periods with at
    /// least 50 of them (0: never pause); with fewer, while fewer than this percent of at
    /// least 50 wake-ups found an idle CPU. A pause ends early once half the wake-ups of a period
    /// find an idle CPU; otherwise it lasts 1 s, doubling up to 8 s while the probe after each
    /// one fails.
    #[arg(long, default_value_t = 10.0)]
    min_followed_pct: f64,

    /// Pause inference, as for --min-followed-pct, while fewer than this percent of the usable
    /// predictions moved a task off its previous CPU: the others kept tasks where the fallback
    /// keeps them without a model (0: never). During such a pause the BPF side places tasks as
    /// without a model (no prediction lookup, no events); no early resume: the probe after the
    /// pause decides.
    #[arg(long, default_value_t = 1.0)]
    min_moved_pct: f64,

    /// Keep the events flowing during a pause for busy CPUs (--min-followed-pct), so that the
    /// task windows are current when inference resumes, at the cost of scx_gru's CPU time.
    /// Off by default: such a pause places tasks as without a model, as a redundant pause
    /// does (no prediction lookup and no events).
    #[arg(long)]
    busy_pause_keeps_events: bool,

    /// Keep scx_gru's own thread first on its CPU after its slice too, not only when it wakes
    /// up. Off by default: a model run that outlasts its slice queues by vtime like any task
    /// instead of holding the CPU until it is done.
    #[arg(long)]
    usersched_always_first: bool,

    /// Most tasks one model run predicts (the runtime's fixed cost per run is most of the
    /// time of a run: a batch shares it); 1 to 4096.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    max_batch: u64,

    /// Seconds between stats lines and stats-file updates.
    #[arg(long, default_value_t = 2.0)]
    stats_interval: f64,

    /// Stats file (JSON, schema asa.gru-stats v2: the statistics --stats prints, flat and
    /// cumulative since attach), rewritten every interval.
    #[arg(long, default_value = "/run/scx_gru/stats.json")]
    stats_file: PathBuf,

    /// Turn off wakeup preemption (on by default). With it, a waking task that finds no idle
    /// CPU and whose deadline is before that of the task running on its previous CPU by more
    /// than --preempt-margin-us preempts that task (once it has run --preempt-min-run-us)
    /// instead of waiting in a queue for its slice to end. A deadline is vtime + the burst
    /// (see --burst-cap-ms): the wakee's burst before it slept, the running task's since it
    /// woke up.
    #[arg(long)]
    no_wakeup_preempt: bool,

    /// Deferred wakeup preemption, in microseconds (0, the default: off): a wake-up that would
    /// preempt a CPU hog (a task that has not slept for --burst-cap-ms) on its previous CPU
    /// but for --preempt-min-run-us arms that CPU's timer to preempt the hog once it has run
    /// this long (at least --preempt-min-run-us), instead of waiting for the end of its
    /// slice.
    #[arg(long, default_value_t = 0)]
    deferred_preempt_us: u64,

    /// How far (vtime, microseconds) a wakee's deadline must be before the running task's to
    /// preempt it.
    #[arg(long, default_value_t = 2500)]
    preempt_margin_us: u64,

    /// How long (microseconds) a running task keeps its CPU before a wake-up may preempt it:
    /// tasks that wake each other after shorter bursts do not cut each other's.
    #[arg(long, default_value_t = 2000)]
    preempt_min_run_us: u64,

    /// Turn off wakeup preemption for tasks that can run on one CPU only (per-CPU kernel
    /// threads such as kworkers; on by default): with it a waking one preempts the running
    /// task by the same deadline rule as other wake-ups; without it they wait on their CPU's
    /// local queue for the running task's slice to end.
    #[arg(long)]
    no_pinned_preempt: bool,

    /// Kernel-thread preemption, in microseconds (0, the default: off): a waking kernel thread
    /// (the ext4 journal's jbd2, a kworker) whose deadline is clearly before that of a CPU hog
    /// (a task that has not slept for --burst-cap-ms) running on its CPU preempts the hog once
    /// the hog has run this long, instead of --preempt-min-run-us: at once if it has, else by
    /// the CPU's timer: kernel threads that other tasks wait on (the journal, for fsync()) do
    /// not wait out a hog's slice.
    #[arg(long, default_value_t = 0)]
    kthread_preempt_us: u64,

    /// The shared DSQ and the wake queues are ordered by a deadline, vtime + the vtime a task
    /// used since it last woke up, capped at this many milliseconds: tasks that sleep after
    /// short bursts (I/O) go ahead of tasks that run without sleeping. 0: ordered by vtime
    /// alone. The default, 5, is the default slice. Every task's vtime is kept within one
    /// slice of the global vtime, so a cap above the slice makes the burst a priority class
    /// (tasks that have not slept for the slice wait behind every task that just woke);
    /// scx_gru warns then.
    #[arg(long, default_value_t = 5)]
    burst_cap_ms: u64,

    /// A CPU taking work from the shared DSQ prefers, among its first 4 tasks, one that last
    /// ran on it if its deadline is within this many microseconds (vtime) of the head's:
    /// fewer migrations (warmer caches), the head delayed by at most the window. 0 (the
    /// default): off, the head always.
    #[arg(long, default_value_t = 0)]
    dispatch_affinity_us: u64,

    /// Turn off the wake queues (on by default): every task that waits for a CPU waits in the
    /// shared DSQ. With them, a wake-up that finds no idle CPU waits in its CPU's own
    /// deadline-ordered queue, and runs there unless a CPU with nothing else to run takes it:
    /// fewer moves of tasks between CPUs' run queues. They need Linux 6.19 or later
    /// (`scx_bpf_dsq_peek`): on an older kernel scx_gru turns them off and logs why.
    #[arg(long)]
    no_wake_queues: bool,

    /// Wake-queue balance, in tasks: a wake-up whose CPU's wake queue holds at least this many
    /// tasks more than another CPU's (one other CPU the task may use, drawn at random) waits
    /// in that CPU's queue instead, if the task running there has a later deadline by more
    /// than the preemption margin (a CPU hog). 0 (the default): off, a wake-up waits where it
    /// last ran, and another CPU takes it only when it has nothing else to run.
    #[arg(long, default_value_t = 0)]
    wake_balance: u32,

    /// Run the model and write its predictions as usual, but place every task by the fallback
    /// policy (counted as `nr_pred_ignored`): measures what following the predictions changes.
    #[arg(long)]
    observe_only: bool,

    /// Load the model with ONNX Runtime, run it once, say what was loaded and exit without
    /// attaching (needs neither root nor sched_ext): checks a model before it is installed.
    /// With --bpf-model: checks that file instead.
    #[arg(long)]
    check_model: bool,

    /// Exit debug dump buffer length, in bytes (0, the default: the kernel's default).
    #[arg(long, default_value_t = 0)]
    exit_dump_len: u32,

    /// Also print the scheduler's statistics every SECS seconds (through the scx_stats server,
    /// as every scx scheduler; each line holds the change over the interval).
    #[arg(long, value_name = "SECS")]
    stats: Option<f64>,

    /// Print the statistics of the scx_gru already running every SECS seconds, without
    /// launching a scheduler.
    #[arg(long, value_name = "SECS")]
    monitor: Option<f64>,

    /// Describe the statistics that --stats and --monitor print, and exit.
    #[arg(long)]
    help_stats: bool,
}

/// `--check-model`: loads the model, runs it once and says what was loaded (no BPF, no root).
fn check_model(opts: &Opts) -> Result<()> {
    let nr_cpus = libbpf_rs::num_possible_cpus().context("count possible CPUs")?;
    match load_mode(opts, nr_cpus)? {
        Mode::Model(model, path) => {
            println!(
                "model {} loads and runs: {} ({nr_cpus} CPUs here)",
                path.display(),
                describe(&model)
            );
            Ok(())
        }
        Mode::BpfModel(model, path) => {
            println!(
                "in-BPF model {} passes the checks: {} ({nr_cpus} CPUs here)",
                path.display(),
                model.describe()
            );
            Ok(())
        }
        Mode::FallbackOnly(why) => bail!("no model to check: {why}"),
    }
}

/// Prints the stats of the running scx_gru every `secs` seconds from a thread of its own,
/// until `shutdown`.
fn spawn_monitor(secs: f64, shutdown: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Err(e) = metrics::monitor(Duration::from_secs_f64(secs.max(0.1)), shutdown) {
            warn!("stats monitor: {e:#}");
        }
    })
}

fn main() -> std::process::ExitCode {
    // Before any thread and before ONNX Runtime loads (see the function).
    asa_experts::opt_out_of_ort_telemetry();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let opts = Opts::parse();
    match run(&opts) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // One line: what failed and why (the context chain), e.g. a malformed --bpf-model.
        Err(e) => {
            error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Everything `main` does once the options are parsed.
fn run(opts: &Opts) -> Result<()> {
    if opts.help_stats {
        return metrics::server_data(Arc::new(|| {})).describe_meta(&mut std::io::stdout(), None);
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, shutdown.clone()).context("install signal handler")?;
    }
    if let Some(secs) = opts.monitor {
        let _ = spawn_monitor(secs, shutdown).join();
        return Ok(());
    }
    if opts.check_model {
        return check_model(opts);
    }
    if let Some(secs) = opts.stats {
        spawn_monitor(secs, shutdown.clone());
    }

    let mut open_object = MaybeUninit::uninit();
    loop {
        let mut sched = Scheduler::init(opts, &mut open_object)?;
        if !sched.run(&shutdown)?.should_restart() {
            break;
        }
        info!("the kernel asked for a restart: attaching again");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_flags_are_off_by_default_and_take_seconds() {
        let opts = Opts::parse_from(["scx_gru"]);
        assert_eq!(
            (opts.stats, opts.monitor, opts.help_stats),
            (None, None, false)
        );
        let opts = Opts::parse_from(["scx_gru", "--stats", "1.5", "--monitor", "2"]);
        assert_eq!((opts.stats, opts.monitor), (Some(1.5), Some(2.0)));
        let opts = Opts::parse_from(["scx_gru", "--help-stats"]);
        assert!(opts.help_stats);
        // The stats file keeps its own flags.
        let opts = Opts::parse_from(["scx_gru", "--stats", "1", "--stats-file", "/tmp/s.json"]);
        assert_eq!(opts.stats_file, PathBuf::from("/tmp/s.json"));
    }

    #[test]
    fn the_bpf_model_is_off_by_default_and_excludes_the_user_space_model() {
        assert_eq!(Opts::parse_from(["scx_gru"]).bpf_model, None);
        let opts = Opts::parse_from(["scx_gru", "--bpf-model", "/m/mlp.json"]);
        assert_eq!(opts.bpf_model, Some(PathBuf::from("/m/mlp.json")));
        for other in [&["--model", "/m/gru.toml"][..], &["--observe-only"][..]] {
            let args = ["scx_gru", "--bpf-model", "/m/mlp.json"]
                .iter()
                .chain(other)
                .copied();
            let err = Opts::try_parse_from(args).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        }
    }
}

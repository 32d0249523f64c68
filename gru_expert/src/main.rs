//! scx_gru: GRU_sched as a sched_ext scheduler (see README.md).

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use libbpf_rs::{MapCore, MapFlags, MapHandle, RingBufferBuilder};
use log::{info, warn};
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report};

use asa_gru_expert::bpf_intf;
use asa_gru_expert::bpf_skel::BpfSkelBuilder;
use asa_gru_expert::features::TaskEvent;
use asa_gru_expert::follow_gate::{GateConfig, PlacementCounts};
use asa_gru_expert::inference::{
    event_ring, poll_events, run_event_loop, InferenceConfig, Predictor, MAX_POLL_WAIT,
};
use asa_gru_expert::model::{cached_ort_library, GruModel, DEFAULT_MODEL, DEFAULT_ORT_LIB};
use asa_gru_expert::stats::{BpfCounters, StatsSnapshot, UserCounters};

/// GRU_sched: places tasks on the CPU a GRU predicts from their last events,
/// falling back to idle-CPU selection and a shared vtime queue.
#[derive(Debug, Parser)]
#[command(version)]
struct Opts {
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

    /// Stats file (JSON, schema asa.gru-stats v1), rewritten every interval.
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
    #[arg(long)]
    check_model: bool,

    /// Exit debug dump buffer length, in bytes (0, the default: the kernel's default).
    #[arg(long, default_value_t = 0)]
    exit_dump_len: u32,
}

/// The loaded model, or why there is none.
enum Mode {
    Model(Box<GruModel>, PathBuf),
    FallbackOnly(&'static str),
}

/// What a loaded model is, for the log and `--check-model`.
fn describe(model: &GruModel) -> String {
    let meta = model.meta();
    format!(
        "window {}, hidden {}, {} CPUs, trained on {}",
        meta.window, meta.hidden, meta.nr_cpus, meta.trained_on
    )
}

/// The explicit path, else the default one if it exists.
fn explicit_or_default(explicit: &Option<PathBuf>, default: &str) -> Option<PathBuf> {
    explicit
        .clone()
        .or_else(|| Some(PathBuf::from(default)).filter(|p| p.exists()))
}

fn load_mode(opts: &Opts, nr_cpus: usize) -> Result<Mode> {
    if opts.no_model {
        return Ok(Mode::FallbackOnly("--no-model"));
    }
    let model = explicit_or_default(&opts.model, DEFAULT_MODEL);
    let ort_lib = explicit_or_default(&opts.ort_lib, DEFAULT_ORT_LIB)
        .or_else(|| Some(cached_ort_library()).filter(|p| p.is_file()));
    match (&model, &ort_lib) {
        (Some(model), Some(lib)) => {
            let loaded = GruModel::load(model, lib, nr_cpus)
                .with_context(|| format!("load the GRU model {}", model.display()))?;
            info!("model {} loaded: {}", model.display(), describe(&loaded));
            Ok(Mode::Model(Box::new(loaded), model.clone()))
        }
        (None, _) => Ok(Mode::FallbackOnly(
            "no model: no --model / GRU_MODEL and no /usr/local/share/scx_gru/gru.toml",
        )),
        (Some(_), None) => Ok(Mode::FallbackOnly(
            "no ONNX Runtime: no --ort-lib / ORT_DYLIB_PATH and no /usr/local/lib/scx_gru/libonnxruntime.so",
        )),
    }
}

/// The BPF counters; `wake_cpus` is how many CPUs' wake-queue counts to copy (0 without
/// `--wake-balance`, which alone keeps them).
fn bpf_counters(bss: &asa_gru_expert::bpf_skel::types::bss, wake_cpus: usize) -> BpfCounters {
    BpfCounters {
        nr_events: bss.nr_events,
        nr_ringbuf_drops: bss.nr_ringbuf_drops,
        nr_events_fresh: bss.nr_events_fresh,
        nr_events_gap: bss.nr_events_gap,
        nr_ringbuf_wakeups: bss.nr_ringbuf_wakeups,
        nr_pred_applied: bss.nr_pred_applied,
        nr_pred_applied_select: bss.nr_pred_applied_select,
        nr_pred_moved: bss.nr_pred_moved,
        nr_pred_missing: bss.nr_pred_missing,
        nr_pred_stale: bss.nr_pred_stale,
        nr_pred_disallowed: bss.nr_pred_disallowed,
        nr_pred_busy: bss.nr_pred_busy,
        nr_pred_prev_idle: bss.nr_pred_prev_idle,
        nr_pred_ignored: bss.nr_pred_ignored,
        nr_pred_paused: bss.nr_pred_paused,
        nr_direct_idle: bss.nr_direct_idle,
        nr_shared_enqueued: bss.nr_shared_enqueued,
        nr_pinned_local: bss.nr_pinned_local,
        nr_usersched_local: bss.nr_usersched_local,
        nr_usersched_queued: bss.nr_usersched_queued,
        nr_wakeup_preempts: bss.nr_wakeup_preempts,
        nr_pinned_preempts: bss.nr_pinned_preempts,
        nr_deferred_preempts: bss.nr_deferred_preempts,
        nr_timer_preempts: bss.nr_timer_preempts,
        nr_kthread_preempts: bss.nr_kthread_preempts,
        nr_slices_shortened: bss.nr_slices_shortened,
        nr_burst_keyed: bss.nr_burst_keyed,
        nr_select_no_idle: bss.nr_select_no_idle,
        nr_dispatch_affine: bss.nr_dispatch_affine,
        nr_prev_kept: bss.nr_prev_kept,
        nr_wake_queued: bss.nr_wake_queued,
        nr_wake_stolen: bss.nr_wake_stolen,
        nr_wake_balanced: bss.nr_wake_balanced,
        nr_hint_shared: bss.nr_hint_shared,
        nr_hint_wake: bss.nr_hint_wake,
        nr_hint_wake_by_cpu: bss.nr_hint_wake_cpu[..wake_cpus.min(bss.nr_hint_wake_cpu.len())]
            .to_vec(),
        nr_waits_short: bss.nr_waits_short,
        wait_ns_short: bss.wait_ns_short,
        nr_waits_long: bss.nr_waits_long,
        wait_ns_long: bss.wait_ns_long,
    }
}

/// Why `--burst-cap-ms` would make the deadline a priority class, if it does: every task's
/// vtime is kept within one slice of the global vtime, so a burst capped above the slice puts
/// every task that has not slept for the slice behind every task that just woke, whatever
/// either has run (in the lab, the mixed load's CPU hogs got 16-17 % of the CPUs with 40 ms,
/// against 52-53 % under EEVDF).
fn burst_cap_warning(burst_cap_ms: u64, slice_us: u64) -> Option<String> {
    (burst_cap_ms.saturating_mul(1000) > slice_us).then(|| {
        format!(
            "--burst-cap-ms {burst_cap_ms} is above the slice ({slice_us} µs), the window every \
             vtime is kept in: a task that has not slept for the slice will wait behind every \
             task that just woke, whatever either has run"
        )
    })
}

/// Whether the kernel has what the wake queues need (`scx_bpf_dsq_peek`, Linux 6.19 or later).
/// Without it scx_gru runs with every waiting task in the shared DSQ, as `--no-wake-queues`
/// does, and says so; `ops.init` refuses the queues too, should this check be wrong.
fn wake_queues_supported() -> bool {
    match scx_utils::compat::ksym_exists("scx_bpf_dsq_peek") {
        Ok(true) => true,
        Ok(false) => {
            warn!(
                "this kernel has no scx_bpf_dsq_peek (Linux 6.19 or later): wake queues off, \
                 every waiting task in the shared DSQ (as with --no-wake-queues)"
            );
            false
        }
        Err(e) => {
            warn!("cannot tell whether the kernel has scx_bpf_dsq_peek ({e:#}): wake queues off");
            false
        }
    }
}

fn main() -> Result<()> {
    // Before any thread and before ONNX Runtime loads (see the function).
    asa_experts::opt_out_of_ort_telemetry();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let opts = Opts::parse();

    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, shutdown.clone()).context("install signal handler")?;
    }

    let nr_cpus = libbpf_rs::num_possible_cpus().context("count possible CPUs")?;
    let mode = load_mode(&opts, nr_cpus)?;
    if opts.check_model {
        return match &mode {
            Mode::Model(model, path) => {
                println!(
                    "model {} loads and runs: {} ({nr_cpus} CPUs here)",
                    path.display(),
                    describe(model)
                );
                Ok(())
            }
            Mode::FallbackOnly(why) => bail!("no model to check: {why}"),
        };
    }
    let (mode_name, model_path) = match &mode {
        Mode::Model(_, path) => ("model", Some(path.display().to_string())),
        Mode::FallbackOnly(why) => {
            info!("fallback-only mode ({why}): every placement uses the default policy");
            ("fallback-only", None)
        }
    };

    let mut open_object = MaybeUninit::uninit();
    let skel_builder = BpfSkelBuilder::default();
    let wake_queues_on = !opts.no_wake_queues && wake_queues_supported();
    let mut skel = scx_ops_open!(
        skel_builder,
        &mut open_object,
        gru_ops,
        None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
    )?;
    skel.struct_ops.gru_ops_mut().exit_dump_len = opts.exit_dump_len;
    {
        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .context("BPF rodata missing")?;
        ensure!(
            rodata.event_size as usize == TaskEvent::WIRE_SIZE
                && rodata.event_abi_version == bpf_intf::gru_consts_GRU_EVENT_ABI_VERSION,
            "BPF event is {} bytes v{}, user space expects {} bytes v{}",
            rodata.event_size,
            rodata.event_abi_version,
            TaskEvent::WIRE_SIZE,
            bpf_intf::gru_consts_GRU_EVENT_ABI_VERSION
        );
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.slice_min_ns = opts.slice_min_us.min(opts.slice_us) * 1000;
        rodata.prediction_ttl_ns = opts.prediction_ttl_ms * 1_000_000;
        rodata.event_gap_ns = opts.event_gap_ms * 1_000_000;
        rodata.event_refresh_ns = opts.event_refresh_ms * 1_000_000;
        rodata.send_events = matches!(mode, Mode::Model(..));
        rodata.apply_predictions = !opts.observe_only;
        rodata.usersched_always_first = opts.usersched_always_first;
        rodata.usersched_tgid = std::process::id();
        rodata.wakeup_preempt = !opts.no_wakeup_preempt;
        rodata.preempt_margin_ns = opts.preempt_margin_us * 1000;
        rodata.preempt_min_run_ns = opts.preempt_min_run_us * 1000;
        rodata.pinned_preempt = !opts.no_pinned_preempt;
        rodata.kthread_preempt_ns = opts.kthread_preempt_us * 1000;
        rodata.deferred_preempt_ns = match opts.deferred_preempt_us {
            0 => 0,
            us => us.max(opts.preempt_min_run_us) * 1000,
        };
        if let Some(why) = burst_cap_warning(opts.burst_cap_ms, opts.slice_us) {
            warn!("{why}");
        }
        rodata.burst_deadline = opts.burst_cap_ms > 0;
        rodata.burst_cap_ns = opts.burst_cap_ms * 1_000_000;
        rodata.dispatch_affinity_ns = opts.dispatch_affinity_us * 1000;
        rodata.wake_queues = wake_queues_on;
        rodata.wake_balance = opts.wake_balance;
    }
    let mut skel = scx_ops_load!(skel, gru_ops, uei)?;
    let link = scx_ops_attach!(skel, gru_ops)?;
    info!(
        "scx_gru attached ({mode_name}); stats in {}",
        opts.stats_file.display()
    );
    let attached_at = Instant::now();

    let counters = Arc::new(UserCounters::default());
    // (the balance acts on the wake queues only: no per-CPU counts without them)
    let wake_cpus = if opts.wake_balance > 0 && wake_queues_on {
        libbpf_rs::num_possible_cpus().unwrap_or(0)
    } else {
        0
    };
    let write_stats = |skel: &asa_gru_expert::bpf_skel::BpfSkel, log_it: bool| {
        let bss = skel.maps.bss_data.as_ref().expect("BPF bss");
        let snap = StatsSnapshot::new(
            mode_name,
            model_path.clone(),
            attached_at.elapsed().as_secs_f64(),
            bpf_counters(bss, wake_cpus),
            counters.snapshot(),
        );
        if log_it {
            info!("{}", snap.summary());
        }
        if let Err(e) = snap.write_to(&opts.stats_file) {
            warn!("stats file: {e:#}");
        }
    };

    // One thread: it sleeps in the ring buffer's epoll (woken by the BPF side for a batch of
    // events, by a signal, or at the next stats time), then predicts and writes stats.
    let interval = Duration::from_secs_f64(opts.stats_interval.max(0.1));
    let mut next_stats = Instant::now() + interval;
    let events = MapHandle::try_from(&skel.maps.events).context("handle of the events map")?;
    let wait = |next_stats: Instant| {
        next_stats
            .saturating_duration_since(Instant::now())
            .min(MAX_POLL_WAIT)
    };
    let tick = |next_stats: &mut Instant| {
        if Instant::now() >= *next_stats {
            write_stats(&skel, true);
            *next_stats += interval;
        }
        !uei_exited!(&skel, uei)
    };
    let loop_result = match mode {
        Mode::Model(model, _) => {
            let pid_to_cpu =
                MapHandle::try_from(&skel.maps.pid_to_cpu).context("handle of pid_to_cpu")?;
            let config = InferenceConfig {
                repredict_ns: opts.repredict_ms * 1_000_000,
                forget_ns: 10_000_000_000,
                budget_ns_per_s: (opts.inference_budget_pct.clamp(0.0, 100.0) * 1e7) as u64,
                max_batch: opts.max_batch as usize,
                gate: GateConfig {
                    min_followed_pct: opts.min_followed_pct.clamp(0.0, 100.0),
                    min_moved_pct: opts.min_moved_pct.clamp(0.0, 100.0),
                    ..GateConfig::default()
                },
                busy_pause_stops_events: !opts.busy_pause_keeps_events,
            };
            let predictor = Rc::new(RefCell::new(Predictor::new(
                *model,
                pid_to_cpu,
                counters.clone(),
                config,
            )));
            let model_paused =
                MapHandle::try_from(&skel.maps.model_paused).context("handle of model_paused")?;
            predictor
                .borrow_mut()
                .set_pause_switch(Box::new(move |paused: bool| {
                    model_paused
                        .update(
                            &0u32.to_ne_bytes(),
                            &u32::from(paused).to_ne_bytes(),
                            MapFlags::ANY,
                        )
                        .context("update model_paused")
                }));
            let ring = event_ring(&events, predictor.clone())?;
            let next = RefCell::new(next_stats);
            run_event_loop(
                &ring,
                &predictor,
                &shutdown,
                || wait(*next.borrow()),
                || {
                    let bss = skel.maps.bss_data.as_ref().expect("BPF bss");
                    PlacementCounts::from_bpf(&bpf_counters(bss, 0))
                },
                || tick(&mut next.borrow_mut()),
            )
        }
        Mode::FallbackOnly(_) => {
            // No events are sent: the ring buffer's epoll is only a sleep that a signal
            // interrupts.
            let mut builder = RingBufferBuilder::new();
            builder
                .add(&events, |_: &[u8]| 0)
                .context("register the events ring buffer")?;
            let ring = builder.build().context("build the ring buffer poller")?;
            let mut result = Ok(());
            while !shutdown.load(Ordering::Relaxed) {
                if let Err(e) = poll_events(&ring, wait(next_stats)) {
                    result = Err(e);
                    break;
                }
                if !tick(&mut next_stats) {
                    break;
                }
            }
            result
        }
    };
    if let Err(e) = &loop_result {
        warn!("the event loop failed; detaching: {e:#}");
    }

    drop(link);
    write_stats(&skel, true);
    info!("scx_gru detached");
    let exit = uei_report!(&skel, uei)?;
    if exit.should_restart() {
        info!("the kernel asked for a restart");
    }
    loop_result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_cap_above_the_slice_is_warned_about() {
        assert_eq!(burst_cap_warning(5, 5000), None);
        assert_eq!(burst_cap_warning(0, 5000), None);
        assert_eq!(burst_cap_warning(4, 5000), None);
        let why = burst_cap_warning(40, 5000).expect("40 ms above a 5 ms slice");
        assert!(
            why.contains("--burst-cap-ms 40") && why.contains("5000 µs"),
            "{why}"
        );
        assert!(burst_cap_warning(6, 5000).is_some());
        assert!(burst_cap_warning(u64::MAX, 5000).is_some());
        // The defaults agree with each other.
        let opts = Opts::parse_from(["scx_gru"]);
        assert_eq!(burst_cap_warning(opts.burst_cap_ms, opts.slice_us), None);
    }
}

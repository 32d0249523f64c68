//! The scheduler of the `scx_gru` binary (a module of src/main.rs, not of the library), in the
//! shape of the scx schedulers: [`Scheduler::init`] loads the model, opens, configures, loads
//! the BPF program, fills the in-BPF model's map (`--bpf-model`), attaches it and starts the
//! stats server; [`Scheduler::run`] runs the event loop (GRU predictions, the stats file, the
//! stats server's requests, the in-BPF model's swap on SIGHUP) until a signal or the BPF
//! scheduler's exit, then detaches and reports the exit; dropping it detaches it if `run` did
//! not.

use std::cell::{Cell, RefCell};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, OpenObject, RingBuffer, RingBufferBuilder};
use log::{info, warn};
use scx_stats::prelude::StatsServer;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};

use asa_gru_expert::bpf_intf;
use asa_gru_expert::bpf_skel::{BpfSkel, BpfSkelBuilder};
use asa_gru_expert::features::TaskEvent;
use asa_gru_expert::follow_gate::{GateConfig, PlacementCounts};
use asa_gru_expert::inference::{
    event_ring, poll_events, run_event_loop, InferenceConfig, Predictor, MAX_POLL_WAIT,
};
use asa_gru_expert::metrics::{self, Metrics, Waker, MODE_BPF_MODEL};
use asa_gru_expert::mlp::{MlpModel, ModelSlots};
use asa_gru_expert::model::{cached_ort_library, GruModel, DEFAULT_MODEL, DEFAULT_ORT_LIB};
use asa_gru_expert::stats::UserCounters;

use crate::Opts;

/// The loaded model, or why there is none.
pub enum Mode {
    /// A model and its metadata path.
    Model(Box<GruModel>, PathBuf),
    /// `--bpf-model`: the in-BPF model, checked, and its file.
    BpfModel(Box<MlpModel>, PathBuf),
    /// No model: why.
    FallbackOnly(&'static str),
}

/// What a loaded model is, for the log and `--check-model`.
pub fn describe(model: &GruModel) -> String {
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

/// Reads and checks an in-BPF model file for a machine of `nr_cpus` CPUs (see
/// [`MlpModel::load`], [`MlpModel::fit_cpus`]: a model trained for another CPU count is
/// refused).
fn load_bpf_model(path: &Path, nr_cpus: usize) -> Result<MlpModel> {
    let model = MlpModel::load(path)?;
    model
        .fit_cpus(nr_cpus)
        .with_context(|| format!("the model file {}", path.display()))?;
    Ok(model)
}

/// Loads the model the options name (or the installed one), or says why there is none.
/// `--bpf-model` comes first: then no GRU is loaded.
pub fn load_mode(opts: &Opts, nr_cpus: usize) -> Result<Mode> {
    if let Some(path) = &opts.bpf_model {
        let model = load_bpf_model(path, nr_cpus).context("load the in-BPF model (--bpf-model)")?;
        info!(
            "in-BPF model {} loaded: {}",
            path.display(),
            model.describe()
        );
        return Ok(Mode::BpfModel(Box::new(model), path.clone()));
    }
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

/// Why `--burst-cap-ms` would make the deadline a priority class, if it does: every task's
/// vtime is kept within one slice of the global vtime, so a burst capped above the slice puts
/// every task that has not slept for the slice behind every task that just woke, whatever
/// either has run (in the lab, the mixed load's CPU hogs got 16-17 % of the CPUs with 40 ms,
/// against 52-53 % under EEVDF).
pub fn burst_cap_warning(burst_cap_ms: u64, slice_us: u64) -> Option<String> {
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

/// `--bpf-model` at run time: the model slots of the BPF program, the file, and SIGHUP, which
/// asks for the file to be read again.
struct BpfModelSwap {
    slots: RefCell<ModelSlots>,
    path: PathBuf,
    nr_cpus: usize,
    /// Set by SIGHUP.
    reload: Arc<AtomicBool>,
    /// The SIGHUP action (unregistered on drop).
    action: signal_hook::SigId,
}

impl BpfModelSwap {
    /// Fills the BPF program's model map with `model` (model_seq 1) and installs the SIGHUP
    /// action.
    fn install(
        skel: &BpfSkel<'_>,
        model: &MlpModel,
        path: PathBuf,
        nr_cpus: usize,
        counters: &UserCounters,
    ) -> Result<Self> {
        let mut slots = ModelSlots::new(
            MapHandle::try_from(&skel.maps.bpf_models).context("handle of bpf_models")?,
            MapHandle::try_from(&skel.maps.bpf_model_active)
                .context("handle of bpf_model_active")?,
        )?;
        let seq = slots.install(model).context("fill the in-BPF model map")?;
        counters
            .bpf_model_seq
            .store(u64::from(seq), Ordering::Relaxed);
        counters.bpf_model_installs.fetch_add(1, Ordering::Relaxed);
        let reload = Arc::new(AtomicBool::new(false));
        let action = signal_hook::flag::register(libc::SIGHUP, reload.clone())
            .context("install the SIGHUP action")?;
        Ok(Self {
            slots: RefCell::new(slots),
            path,
            nr_cpus,
            reload,
            action,
        })
    }

    /// After a SIGHUP: reads and checks the file again and swaps the model in, or refuses it
    /// (one log line; the model in use keeps deciding).
    fn reload_if_asked(&self, counters: &UserCounters) {
        if !self.reload.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut slots = self.slots.borrow_mut();
        let old = slots.seq();
        match load_bpf_model(&self.path, self.nr_cpus).and_then(|m| {
            let seq = slots.install(&m)?;
            Ok((m, seq))
        }) {
            Ok((model, seq)) => {
                counters
                    .bpf_model_seq
                    .store(u64::from(seq), Ordering::Relaxed);
                counters.bpf_model_installs.fetch_add(1, Ordering::Relaxed);
                info!(
                    "in-BPF model {} swapped in (SIGHUP): {}, model_seq {seq} replaces {old}",
                    self.path.display(),
                    model.describe()
                );
            }
            Err(e) => {
                counters.bpf_model_refused.fetch_add(1, Ordering::Relaxed);
                warn!("in-BPF model replacement refused, model_seq {old} keeps deciding: {e:#}");
            }
        }
    }
}

impl Drop for BpfModelSwap {
    fn drop(&mut self) {
        signal_hook::low_level::unregister(self.action);
    }
}

/// scx_gru attached: the BPF program, the event loop's state and the stats it serves.
pub struct Scheduler<'a> {
    opts: &'a Opts,
    skel: BpfSkel<'a>,
    /// The struct_ops link: dropping it detaches the scheduler.
    struct_ops: Option<libbpf_rs::Link>,
    /// The events ring buffer: its callback feeds the predictor (model mode); without a model
    /// no events come and its epoll is only a sleep that a signal interrupts.
    ring: RingBuffer<'static>,
    /// The handle the ring buffer was built from, kept as long as the ring.
    _events: MapHandle,
    /// The predictor (model mode only).
    predictor: Option<Rc<RefCell<Predictor>>>,
    /// The user-space counters, shared with the predictor.
    counters: Arc<UserCounters>,
    /// "model" or "fallback-only".
    mode_name: &'static str,
    /// The model's metadata path, for the stats.
    model_path: Option<String>,
    attached_at: Instant,
    /// How many CPUs' wake-queue counts the stats copy (see [`Metrics::from_bss`]).
    wake_cpus: usize,
    /// The scx_stats server (`--stats`, `--monitor`); none if it could not start.
    stats_server: Option<StatsServer<(), Metrics>>,
    /// The SIGUSR1 action that lets the stats server wake the loop (see [`loop_waker`]).
    wake_signal: Option<signal_hook::SigId>,
    /// `--bpf-model`: the in-BPF model's slots and its swap on SIGHUP.
    bpf_model: Option<BpfModelSwap>,
}

/// A [`Waker`] for the stats server that interrupts the calling thread's epoll wait (the event
/// loop's: call it from that thread) with SIGUSR1, whose action, installed here and returned,
/// does nothing: epoll_wait is never restarted after a signal, so the loop answers a request
/// at once instead of after up to [`MAX_POLL_WAIT`]. Other system calls of the thread restart
/// (`SA_RESTART`).
fn loop_waker() -> Result<(Waker, signal_hook::SigId)> {
    let action = signal_hook::flag::register(libc::SIGUSR1, Arc::new(AtomicBool::new(false)))
        .context("install the SIGUSR1 action")?;
    // SAFETY: pthread_self has no preconditions.
    let thread = unsafe { libc::pthread_self() };
    let wake: Waker = Arc::new(move || {
        // SAFETY: `thread` is the event loop's thread, the process's main thread, which lives
        // as long as the process; SIGUSR1 has an action (ignored once it is unregistered).
        unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
    });
    Ok((wake, action))
}

impl<'a> Scheduler<'a> {
    /// Loads the model (unless `--no-model`), opens the BPF program in `open_object`, sets its
    /// read-only settings from `opts`, loads and attaches it, builds the predictor and the
    /// events ring buffer, and starts the stats server (a failure to start it is only logged:
    /// scheduling goes on, the stats file too).
    pub fn init(opts: &'a Opts, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let nr_cpus = libbpf_rs::num_possible_cpus().context("count possible CPUs")?;
        let mode = load_mode(opts, nr_cpus)?;
        let (mode_name, model_path) = match &mode {
            Mode::Model(_, path) => ("model", Some(path.display().to_string())),
            Mode::BpfModel(_, path) => (MODE_BPF_MODEL, Some(path.display().to_string())),
            Mode::FallbackOnly(why) => {
                info!("fallback-only mode ({why}): every placement uses the default policy");
                ("fallback-only", None)
            }
        };

        let skel_builder = BpfSkelBuilder::default();
        let wake_queues_on = !opts.no_wake_queues && wake_queues_supported();
        let mut skel = scx_ops_open!(
            skel_builder,
            open_object,
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
            rodata.bpf_model = matches!(mode, Mode::BpfModel(..));
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
        let counters = Arc::new(UserCounters::default());
        // The in-BPF model is in its map before the scheduler attaches: select_cpu has it from
        // the first wake-up on.
        let bpf_model = match &mode {
            Mode::BpfModel(model, path) => {
                let swap = BpfModelSwap::install(&skel, model, path.clone(), nr_cpus, &counters)?;
                info!(
                    "in-BPF model in the map (model_seq {}): select_cpu decides; SIGHUP re-reads {}",
                    swap.slots.borrow().seq(),
                    path.display()
                );
                Some(swap)
            }
            _ => None,
        };
        let struct_ops = scx_ops_attach!(skel, gru_ops)?;
        info!(
            "scx_gru attached ({mode_name}); stats in {}",
            opts.stats_file.display()
        );
        let attached_at = Instant::now();

        // (the balance acts on the wake queues only: no per-CPU counts without them)
        let wake_cpus = if opts.wake_balance > 0 && wake_queues_on {
            nr_cpus
        } else {
            0
        };
        let events = MapHandle::try_from(&skel.maps.events).context("handle of the events map")?;
        let (ring, predictor) = match mode {
            Mode::Model(model, _) => {
                let predictor = Rc::new(RefCell::new(Self::new_predictor(
                    opts,
                    &skel,
                    *model,
                    counters.clone(),
                )?));
                (event_ring(&events, predictor.clone())?, Some(predictor))
            }
            Mode::FallbackOnly(_) | Mode::BpfModel(..) => {
                let mut builder = RingBufferBuilder::new();
                builder
                    .add(&events, |_: &[u8]| 0)
                    .context("register the events ring buffer")?;
                let ring = builder.build().context("build the ring buffer poller")?;
                (ring, None)
            }
        };
        let (wake, wake_signal) = loop_waker()?;
        let stats_server = match StatsServer::new(metrics::server_data(wake)).launch() {
            Ok(server) => Some(server),
            Err(e) => {
                warn!("no stats server, --stats and --monitor cannot reach scx_gru: {e:#}");
                None
            }
        };

        Ok(Self {
            opts,
            skel,
            struct_ops: Some(struct_ops),
            ring,
            _events: events,
            predictor,
            counters,
            mode_name,
            model_path,
            attached_at,
            wake_cpus,
            stats_server,
            wake_signal: Some(wake_signal),
            bpf_model,
        })
    }

    /// The predictor of `model`, writing into the BPF program's `pid_to_cpu` and pausing it
    /// through `model_paused`.
    fn new_predictor(
        opts: &Opts,
        skel: &BpfSkel<'_>,
        model: GruModel,
        counters: Arc<UserCounters>,
    ) -> Result<Predictor> {
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
        let mut predictor = Predictor::new(model, pid_to_cpu, counters, config);
        let model_paused =
            MapHandle::try_from(&skel.maps.model_paused).context("handle of model_paused")?;
        predictor.set_pause_switch(Box::new(move |paused: bool| {
            model_paused
                .update(
                    &0u32.to_ne_bytes(),
                    &u32::from(paused).to_ne_bytes(),
                    MapFlags::ANY,
                )
                .context("update model_paused")
        }));
        Ok(predictor)
    }

    /// The BPF counters, with `wake_cpus` CPUs' wake-queue counts (no header, no user-space
    /// counters).
    fn bpf_metrics(&self, wake_cpus: usize) -> Metrics {
        let bss = self.skel.maps.bss_data.as_ref().expect("BPF bss");
        Metrics::from_bss(bss, wake_cpus)
    }

    /// The metrics as they are now (cumulative since attach): what the stats file holds and
    /// what the stats server gets.
    fn metrics(&self) -> Metrics {
        let mut metrics = self.bpf_metrics(self.wake_cpus).with_header(
            self.mode_name,
            self.model_path.as_deref().unwrap_or(""),
            self.attached_at.elapsed().as_secs_f64(),
        );
        self.counters.copy_into(&mut metrics);
        metrics
    }

    /// Writes the stats file, and logs its summary line if `log_it`.
    fn write_stats(&self, log_it: bool) {
        let metrics = self.metrics();
        if log_it {
            info!("{}", metrics.summary());
        }
        if let Err(e) = metrics.write_to(&self.opts.stats_file) {
            warn!("stats file: {e:#}");
        }
    }

    /// Answers the stats server's pending requests with the current metrics.
    fn serve_stats(&self) {
        let Some(server) = &self.stats_server else {
            return;
        };
        let (res_ch, req_ch) = server.channels();
        while req_ch.try_recv().is_ok() {
            if let Err(e) = res_ch.send(self.metrics()) {
                warn!("stats server: {e}");
                break;
            }
        }
    }

    /// Between two waits of the event loop: swaps the in-BPF model after a SIGHUP, writes the
    /// stats file (and logs it) once `next_stats` is past, then moves it on by `interval`, and
    /// serves the stats requests.
    /// False once the BPF scheduler has exited.
    fn tick(&self, next_stats: &Cell<Instant>, interval: Duration) -> bool {
        // (first: the stats written next show the model swapped in, or the refusal)
        if let Some(swap) = &self.bpf_model {
            swap.reload_if_asked(&self.counters);
        }
        if Instant::now() >= next_stats.get() {
            self.write_stats(true);
            next_stats.set(next_stats.get() + interval);
        }
        // Last before the wait: a request whose wake-up signal came while the stats were
        // written (not in the wait, so lost) is answered now, not a wait later.
        self.serve_stats();
        !uei_exited!(&self.skel, uei)
    }

    /// The event loop: one thread sleeps in the ring buffer's epoll (woken by the BPF side
    /// for a batch of events, by a signal, a stats request included, or at the next stats
    /// time, at most [`MAX_POLL_WAIT`] later), then predicts (model mode) and ticks (see
    /// [`Self::tick`]), until `shutdown` or the BPF scheduler's exit.
    fn event_loop(&self, shutdown: &AtomicBool) -> Result<()> {
        let interval = Duration::from_secs_f64(self.opts.stats_interval.max(0.1));
        let next_stats = Cell::new(Instant::now() + interval);
        let wait = || {
            next_stats
                .get()
                .saturating_duration_since(Instant::now())
                .min(MAX_POLL_WAIT)
        };
        match &self.predictor {
            Some(predictor) => run_event_loop(
                &self.ring,
                predictor,
                shutdown,
                wait,
                || PlacementCounts::from_metrics(&self.bpf_metrics(0)),
                || self.tick(&next_stats, interval),
            ),
            None => {
                while !shutdown.load(Ordering::Relaxed) {
                    poll_events(&self.ring, wait())?;
                    if !self.tick(&next_stats, interval) {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// Runs the event loop until `shutdown` or the BPF scheduler's exit, detaches, writes the
    /// last stats and reports the exit (its [`UserExitInfo::should_restart`] tells whether
    /// the kernel asked for a restart). An error of the event loop detaches too, and is
    /// returned after the exit report.
    pub fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        let loop_result = self.event_loop(shutdown);
        if let Err(e) = &loop_result {
            warn!("the event loop failed; detaching: {e:#}");
        }
        drop(self.struct_ops.take());
        self.write_stats(true);
        info!("scx_gru detached");
        let exit = uei_report!(&self.skel, uei)?;
        loop_result.map(|()| exit)
    }
}

impl Drop for Scheduler<'_> {
    /// Detaches the scheduler if [`Scheduler::run`] did not (an error on the way to it), stops
    /// the stats server and removes its SIGUSR1 action.
    fn drop(&mut self) {
        if self.struct_ops.take().is_some() {
            info!("scx_gru detached");
        }
        drop(self.stats_server.take());
        if let Some(action) = self.wake_signal.take() {
            signal_hook::low_level::unregister(action);
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn the_stats_waker_interrupts_the_loops_epoll_wait() {
        let (wake, action) = loop_waker().unwrap();
        // SAFETY: plain epoll calls on a fresh descriptor, closed at the end.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epoll >= 0);
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            wake();
        });
        let start = Instant::now();
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: one event buffer of one entry.
        let n = unsafe { libc::epoll_wait(epoll, &mut event, 1, 10_000) };
        let errno = std::io::Error::last_os_error().raw_os_error();
        waker.join().unwrap();
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(epoll) };
        signal_hook::low_level::unregister(action);
        assert_eq!((n, errno), (-1, Some(libc::EINTR)));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

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

//! `asa scenario run --oracle-hints`: the scenario runner's own labels (the probe and each
//! load's `app_class`) written as scx_layered task hints, as a perfect application classifier
//! would — per-application mode with every class right, to measure the layer plan apart from
//! the classifier.
//!
//! While a run of an expert that takes a layer plan is on, a worker thread owns an
//! [`AppHints`] on the plan's hint map and re-applies the labelled applications every
//! [`REAPPLY`]: a load's processes are forked by the runner (the probe) and inherit its hint
//! at fork, so a walk must give each new one its own class soon after. At the end of the run the
//! worker clears every hint it wrote, so no run and no later agent finds them.
//!
//! Invariant: hints exist only between a layer-plan run's first application and its end; a
//! failure to write them fails the run (its measurement would not be what it says).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use asa_experts::Catalogue;
use asa_layers::LayerPlan;
use asa_scenarios::catalogue::ScenarioSpec;
use asa_scenarios::runner::RunRecord;
use asa_scenarios::{LabelledApp, RunObserver};

use super::app_hints::AppHints;
use crate::perception::apps::AppKey;

/// How often the worker re-applies the hints while a run is on.
pub const REAPPLY: Duration = Duration::from_millis(500);

/// The observer: hints during layer-plan runs, nothing during the others.
pub struct OracleHints {
    catalogue: Catalogue,
    plan: LayerPlan,
    hint_map: PathBuf,
    worker: Option<Worker>,
}

struct Worker {
    wanted: Sender<BTreeMap<AppKey, u32>>,
    thread: JoinHandle<Result<()>>,
}

impl OracleHints {
    /// Hints by `plan` on `hint_map` for the runs of `catalogue`'s layer-plan experts.
    pub fn new(catalogue: Catalogue, plan: LayerPlan, hint_map: PathBuf) -> Self {
        Self {
            catalogue,
            plan,
            hint_map,
            worker: None,
        }
    }

    /// The hints of `apps`: each application's key (its group's leader, else this process
    /// when the group is this process's) and its class's hint.
    fn hints(&self, apps: &[LabelledApp]) -> Result<BTreeMap<AppKey, u32>> {
        let own = std::process::id();
        let mut hints = BTreeMap::new();
        for app in apps {
            if app.pgid == 0 {
                bail!(
                    "class {:?} given to process group 0, the kernel threads': the runner must lead a group of its own",
                    app.class
                );
            }
            let hint = self.plan.hint_of(&app.class).ok_or_else(|| {
                anyhow!(
                    "class {:?} (process group {}) has no layer in the plan",
                    app.class,
                    app.pgid
                )
            })?;
            let key = AppKey::of_process(app.pgid)
                .or_else(|e| match AppKey::of_process(own) {
                    Ok(k) if k.pgid == app.pgid => Ok(k),
                    _ => Err(e),
                })
                .with_context(|| format!("the application of process group {}", app.pgid))?;
            hints.insert(key, hint);
        }
        Ok(hints)
    }

    fn stop_worker(&mut self) -> Result<()> {
        let Some(worker) = self.worker.take() else {
            return Ok(());
        };
        drop(worker.wanted);
        worker
            .thread
            .join()
            .map_err(|_| anyhow!("the oracle-hint worker panicked"))?
    }
}

impl RunObserver for OracleHints {
    fn run_starting(&mut self, _: &ScenarioSpec, expert: &str, _: u32) -> Result<()> {
        self.stop_worker()?;
        if !self.catalogue.get(expert).is_some_and(|e| e.layer_plan) {
            return Ok(());
        }
        let (wanted, receive) = mpsc::channel();
        let (ready, loaded) = mpsc::sync_channel(1);
        let pin = self.hint_map.clone();
        let thread = std::thread::Builder::new()
            .name("oracle-hints".into())
            .spawn(move || work(&pin, &ready, &receive))
            .context("spawning the oracle-hint worker")?;
        match loaded.recv() {
            Ok(Ok(())) => {
                self.worker = Some(Worker { wanted, thread });
                Ok(())
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(anyhow!(e))
            }
            Err(_) => Err(anyhow!("the oracle-hint worker ended before loading")),
        }
    }

    fn applications(&mut self, apps: &[LabelledApp]) -> Result<()> {
        if self.worker.is_none() {
            return Ok(());
        }
        let hints = self.hints(apps)?;
        let described: Vec<String> = apps
            .iter()
            .map(|a| format!("group {} {}", a.pgid, a.class))
            .collect();
        log::info!("oracle hints: {}", described.join(", "));
        let sent = self.worker.as_ref().map(|w| w.wanted.send(hints));
        if let Some(Err(_)) = sent {
            // The worker ended on an error: say which.
            return self
                .stop_worker()
                .and(Err(anyhow!("the oracle-hint worker stopped")));
        }
        Ok(())
    }

    fn run_finished(&mut self, _: &ScenarioSpec, _: Option<&RunRecord>) -> Result<()> {
        self.stop_worker()
    }
}

impl Drop for OracleHints {
    fn drop(&mut self) {
        if let Err(e) = self.stop_worker() {
            log::warn!("clearing the oracle hints: {e:#}");
        }
    }
}

/// The worker: loads the hint writer (telling `ready`), then applies the latest wanted hints
/// every [`REAPPLY`] until the sender is dropped, and clears them.
fn work(
    pin: &std::path::Path,
    ready: &mpsc::SyncSender<std::result::Result<(), String>>,
    wanted: &Receiver<BTreeMap<AppKey, u32>>,
) -> Result<()> {
    let mut hints = match AppHints::load(pin) {
        Ok(h) => {
            let _ = ready.send(Ok(()));
            h
        }
        Err(e) => {
            let _ = ready.send(Err(format!("{e:#}")));
            return Ok(());
        }
    };
    // Whatever an earlier run or agent left: not this run's.
    hints.set(&BTreeMap::new())?;
    loop {
        match wanted.recv_timeout(REAPPLY) {
            Ok(next) => hints.set(&next)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        hints.apply().context("applying the oracle hints")?;
    }
    hints.set(&BTreeMap::new())?;
    hints.apply().context("clearing the oracle hints")?;
    Ok(())
}

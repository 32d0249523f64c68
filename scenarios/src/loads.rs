//! Background loads from real Debian tools, described as data in the scenario file: the
//! command line, the Debian package that provides it, how its inputs are prepared (a generated
//! text corpus, an inline scene or script, a shell step), and how its throughput is read.
//!
//! Placeholders in commands and scripts: `{work}` (the load's work folder), `{seconds}` (the
//! phase length in whole seconds, at least 1), `{cpus}` (available CPUs).
//!
//! A load runs in its own process group; stopping it sends SIGTERM to the group, then SIGKILL.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use log::{debug, info, warn};
use serde::{Deserialize, Serialize};

use crate::score::ValueSpec;

/// A background load as written in the scenario file (`[load.<name>]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// What the load stands for.
    pub description: String,
    /// The Debian package providing the main command.
    pub package: String,
    /// Further binaries or files the load needs, each with its package.
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// Steps that create the inputs in the work folder, run once before the measurement.
    #[serde(default)]
    pub prepare: Vec<PrepareStep>,
    /// Helper processes started before the command and stopped after it (e.g. an iperf3 server).
    #[serde(default)]
    pub servers: Vec<Vec<String>>,
    /// The command line (program and arguments).
    pub command: Vec<String>,
    /// Start the command again each time it finishes, until the phase ends.
    #[serde(default)]
    pub repeat: bool,
    /// Throw the command's stdout away (for tools that write their product there).
    #[serde(default)]
    pub discard_stdout: bool,
    /// How the throughput is read.
    pub throughput: ThroughputSpec,
    /// How the throughput is scored.
    pub score: ValueSpec,
    /// The application class its processes are labelled with in per-application recordings
    /// (`interactive`, `io_bound`, `network`, `cpu_batch` or `background`: the layer plan's).
    pub app_class: String,
}

/// A binary on PATH or a file (glob with one `*`) a load needs, and the package providing it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// A program that must be on PATH.
    #[serde(default)]
    pub binary: Option<String>,
    /// A file that must exist; one `*` in the file name is allowed.
    #[serde(default)]
    pub path_glob: Option<String>,
    /// The Debian package that provides it.
    pub package: String,
}

/// One preparation step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PrepareStep {
    /// Write a deterministic English-like text corpus (compresses about 3-4×).
    TextCorpus {
        /// File, relative to the work folder.
        file: String,
        /// Size in MiB.
        megabytes: u64,
    },
    /// Write a file with the given contents (a scene, a script).
    WriteFile {
        /// File, relative to the work folder.
        file: String,
        /// Its contents (placeholders are expanded).
        contents: String,
    },
    /// Run `sh -c script` in the work folder unless `creates` already exists there.
    Shell {
        /// The script (placeholders are expanded).
        script: String,
        /// A path, relative to the work folder, that the script creates.
        creates: String,
    },
}

/// How a load's throughput is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ThroughputSpec {
    /// Each successful run does `amount` `unit`s: rate = amount × runs / time to the last
    /// completed run (0 when no run completed).
    Completions {
        /// Work per run.
        amount: f64,
        /// Unit of the work (the rate is per second).
        unit: String,
    },
    /// The command prints JSON on stdout: rate = scale × sum of the values at these JSON
    /// pointers (averaged over runs).
    Json {
        /// JSON pointers (RFC 6901).
        pointers: Vec<String>,
        /// Multiplier to the rate unit.
        scale: f64,
        /// Unit of the resulting rate (already per second).
        unit: String,
    },
    /// The command reports progress as `<key>N` (e.g. `frame=120`, `Rendered 5120 of ...`):
    /// rate = sum over runs of the last N after `key` in stdout (else stderr) / elapsed.
    /// Runs stopped at the end of the phase count with the progress they made.
    Counter {
        /// The text right before the number, separator included (`frame=`, `Rendered `).
        key: String,
        /// Unit of N (the rate is per second).
        unit: String,
    },
    /// Count output lines (stdout and stderr) containing a text (or, with `at_start`, starting
    /// with it): rate = count / elapsed.
    Lines {
        /// The text.
        contains: String,
        /// Only count lines that start with the text.
        #[serde(default)]
        at_start: bool,
        /// What one line stands for (the rate is per second).
        unit: String,
    },
}

impl ThroughputSpec {
    /// The unit of the rate this spec yields.
    pub fn rate_unit(&self) -> String {
        match self {
            Self::Json { unit, .. } => unit.clone(),
            Self::Completions { unit, .. }
            | Self::Counter { unit, .. }
            | Self::Lines { unit, .. } => {
                format!("{unit}/s")
            }
        }
    }

    /// True when the command runs for `{seconds}` by itself and must be allowed to finish.
    fn self_timed(&self) -> bool {
        matches!(self, Self::Json { .. })
    }
}

/// What a background load did during one phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadOutput {
    /// Load name.
    pub load: String,
    /// Throughput in `unit` (None when it could not be read).
    pub throughput: Option<f64>,
    /// Unit of the throughput.
    pub unit: String,
    /// Wall time the load ran (s).
    pub elapsed_s: f64,
    /// Runs that finished successfully.
    pub completed_runs: u64,
    /// Runs that failed (non-zero exit not caused by the stop).
    pub failed_runs: u64,
    /// The last failure's message and output tail.
    pub last_error: Option<String>,
    /// The process groups the load ran in: its command's (every run of a repeated command
    /// joins one group, as a script's loop would) and each server's.
    #[serde(default)]
    pub process_groups: Vec<u32>,
}

/// Expand `{work}`, `{seconds}` and `{cpus}`.
pub fn expand(text: &str, work: &Path, seconds: u64) -> String {
    text.replace("{work}", &work.display().to_string())
        .replace("{seconds}", &seconds.max(1).to_string())
        .replace("{cpus}", &cpus().to_string())
}

/// CPUs available to this process.
pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Find `program` on PATH (or as given, when it contains a `/`).
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// True when a file matching `glob` (at most one `*`, in the file name) exists.
pub fn glob_exists(glob: &str) -> bool {
    let path = Path::new(glob);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return false;
    };
    match name.split_once('*') {
        None => path.exists(),
        Some((prefix, suffix)) => std::fs::read_dir(dir)
            .map(|entries| {
                entries.flatten().any(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.len() >= prefix.len() + suffix.len()
                        && n.starts_with(prefix)
                        && n.ends_with(suffix)
                })
            })
            .unwrap_or(false),
    }
}

impl LoadSpec {
    /// Check that every tool and file the load needs is present; the error names the Debian
    /// package to install.
    pub fn check_tools(&self, name: &str) -> Result<()> {
        let program = self
            .command
            .first()
            .ok_or_else(|| anyhow!("load `{name}`: field `command` is empty"))?;
        if find_on_path(program).is_none() {
            bail!(
                "load `{name}` needs `{program}`, which is not on PATH: install the Debian \
                 package `{}` (apt-get install {})",
                self.package,
                self.package
            );
        }
        for server in &self.servers {
            if let Some(p) = server.first() {
                if find_on_path(p).is_none() {
                    bail!(
                        "load `{name}` needs `{p}`, which is not on PATH: install the Debian \
                         package `{}` (apt-get install {})",
                        self.package,
                        self.package
                    );
                }
            }
        }
        for req in &self.requires {
            if let Some(b) = &req.binary {
                if find_on_path(b).is_none() {
                    bail!(
                        "load `{name}` needs `{b}`, which is not on PATH: install the Debian \
                         package `{}` (apt-get install {})",
                        req.package,
                        req.package
                    );
                }
            }
            if let Some(g) = &req.path_glob {
                if !glob_exists(g) {
                    bail!(
                        "load `{name}` needs a file matching `{g}`: install the Debian package \
                         `{}` (apt-get install {})",
                        req.package,
                        req.package
                    );
                }
            }
        }
        Ok(())
    }

    /// Create the load's inputs in `work` (idempotent: corpora and `creates` are reused).
    pub fn prepare(&self, name: &str, work: &Path) -> Result<()> {
        std::fs::create_dir_all(work)
            .with_context(|| format!("creating the work folder {}", work.display()))?;
        for step in &self.prepare {
            match step {
                PrepareStep::TextCorpus { file, megabytes } => {
                    let path = work.join(file);
                    let want = megabytes * 1024 * 1024;
                    if std::fs::metadata(&path).map(|m| m.len()).ok() == Some(want) {
                        continue;
                    }
                    info!(
                        "load {name}: writing a {megabytes} MiB text corpus to {}",
                        path.display()
                    );
                    write_text_corpus(&path, want)?;
                }
                PrepareStep::WriteFile { file, contents } => {
                    let path = work.join(file);
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::write(&path, expand(contents, work, 1))
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                PrepareStep::Shell { script, creates } => {
                    if work.join(creates).exists() {
                        continue;
                    }
                    let script = expand(script, work, 1);
                    info!("load {name}: preparing with `{script}`");
                    let out = Command::new("sh")
                        .arg("-c")
                        .arg(&script)
                        .current_dir(work)
                        .stdin(Stdio::null())
                        .output()
                        .with_context(|| format!("running `sh -c {script}`"))?;
                    if !out.status.success() {
                        bail!(
                            "load `{name}`: preparation step `{script}` failed ({}): {}",
                            out.status,
                            tail(&String::from_utf8_lossy(&out.stderr), 8)
                        );
                    }
                    if !work.join(creates).exists() {
                        bail!(
                            "load `{name}`: preparation step `{script}` did not create `{creates}`"
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// The last `n` lines of a text.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Write `bytes` of deterministic English-like text: words from a fixed vocabulary with a
/// skewed (Zipf-like) choice, numbers, punctuation and line breaks.
pub fn write_text_corpus(path: &Path, bytes: u64) -> Result<()> {
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "had",
        "they",
        "you",
        "were",
        "their",
        "one",
        "all",
        "we",
        "can",
        "her",
        "has",
        "there",
        "been",
        "if",
        "more",
        "when",
        "will",
        "would",
        "who",
        "so",
        "no",
        "scheduler",
        "kernel",
        "process",
        "thread",
        "memory",
        "latency",
        "throughput",
        "frame",
        "audio",
        "buffer",
        "deadline",
        "priority",
        "interactive",
        "workload",
        "compile",
        "render",
        "network",
        "archive",
        "document",
        "window",
        "system",
        "performance",
        "experience",
        "measurement",
        "background",
        "foreground",
        "expert",
        "policy",
    ];
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut rng = crate::clock::Rng::new(0xC0FFEE);
    let mut written = 0u64;
    let mut line = String::with_capacity(128);
    while written < bytes {
        line.clear();
        let words = rng.int(6, 16);
        for i in 0..words {
            // Skewed choice: small indices much more often.
            let r = rng.uniform(0.0, 1.0);
            let idx = ((r * r * r) * WORDS.len() as f64) as usize;
            if i > 0 {
                line.push(' ');
            }
            if rng.int(0, 30) == 0 {
                line.push_str(&rng.int(0, 99_999).to_string());
            } else {
                line.push_str(WORDS[idx.min(WORDS.len() - 1)]);
            }
        }
        line.push_str(if rng.int(0, 4) == 0 { ".\n" } else { ",\n" });
        let chunk = &line.as_bytes()[..line.len().min((bytes - written) as usize)];
        out.write_all(chunk)?;
        written += chunk.len() as u64;
    }
    out.flush()?;
    Ok(())
}

/// A load running in the background.
pub struct RunningLoad {
    name: String,
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Option<u32>>>,
    /// The process group every run of the command joins.
    group: u32,
    /// Its leader, an idle `sleep` (None once stopped).
    group_leader: Option<Child>,
    servers: Vec<Child>,
    worker: Option<JoinHandle<Result<LoadOutput>>>,
    self_timed: bool,
}

struct RunRecord {
    ok: bool,
    stopped: bool,
    stdout: String,
    stderr: String,
    status: String,
    finished_at: Duration,
}

impl RunningLoad {
    /// Start `spec` (already prepared in `work`) for a phase of `seconds`.
    pub fn start(name: &str, spec: &LoadSpec, work: &Path, seconds: u64) -> Result<Self> {
        spec.check_tools(name)?;
        let mut servers = Vec::new();
        for server in &spec.servers {
            let args: Vec<String> = server.iter().map(|a| expand(a, work, seconds)).collect();
            let child = Command::new(&args[0])
                .args(&args[1..])
                .current_dir(work)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .with_context(|| format!("load `{name}`: starting server `{}`", args.join(" ")))?;
            servers.push(child);
        }
        if !servers.is_empty() {
            std::thread::sleep(Duration::from_millis(300));
        }
        // One process group for the whole phase: runs of a repeated command are one
        // application, as the loop of a script would be, not one per run.
        let group_leader = Command::new("sleep")
            .arg("infinity")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| {
                format!("load `{name}`: starting its process group's leader (sleep)")
            })?;
        let group = group_leader.id();
        let stop = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(None));
        let args: Vec<String> = spec
            .command
            .iter()
            .map(|a| expand(a, work, seconds))
            .collect();
        let (spec_c, stop_c, current_c, name_c, work_c) = (
            spec.clone(),
            stop.clone(),
            current.clone(),
            name.to_owned(),
            work.to_owned(),
        );
        info!("load {name}: starting `{}`", args.join(" "));
        let worker = std::thread::Builder::new()
            .name(format!("load-{name}"))
            .spawn(move || run_loop(&name_c, &spec_c, &args, &work_c, group, &stop_c, &current_c))
            .context("spawning a load thread")?;
        Ok(Self {
            name: name.to_owned(),
            stop,
            current,
            group,
            group_leader: Some(group_leader),
            servers,
            worker: Some(worker),
            self_timed: spec.throughput.self_timed(),
        })
    }

    /// Stop the load and read its throughput.
    pub fn finish(mut self) -> Result<LoadOutput> {
        self.stop.store(true, Ordering::SeqCst);
        if self.self_timed {
            // Let a `{seconds}`-bounded tool finish and print its report.
            let t0 = Instant::now();
            while self.current.lock().unwrap().is_some() && t0.elapsed() < Duration::from_secs(15) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if self.current.lock().unwrap().is_some() {
            signal_group(self.group, libc::SIGTERM);
        }
        let worker = self.worker.take().expect("finish is called once");
        let t0 = Instant::now();
        while !worker.is_finished() {
            if t0.elapsed() > Duration::from_secs(5) && self.current.lock().unwrap().is_some() {
                warn!(
                    "load {}: still running 5 s after SIGTERM, sending SIGKILL",
                    self.name
                );
                signal_group(self.group, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = worker
            .join()
            .map_err(|_| anyhow!("load {} thread panicked", self.name))?;
        let process_groups = self.process_groups();
        self.stop_group();
        self.stop_servers();
        let mut out = out?;
        out.process_groups = process_groups;
        if out.failed_runs > 0 && out.completed_runs == 0 {
            bail!(
                "load `{}` failed every time it ran ({} runs): {}",
                self.name,
                out.failed_runs,
                out.last_error.as_deref().unwrap_or("no output")
            );
        }
        Ok(out)
    }

    /// The process groups of the command's runs and of the servers.
    pub fn process_groups(&self) -> Vec<u32> {
        std::iter::once(self.group)
            .chain(self.servers.iter().map(Child::id))
            .collect()
    }

    /// Ends the command's process group (its leader, and a run still in it).
    fn stop_group(&mut self) {
        if let Some(mut leader) = self.group_leader.take() {
            signal_group(self.group, libc::SIGKILL);
            let _ = leader.wait();
        }
    }

    fn stop_servers(&mut self) {
        for mut s in self.servers.drain(..) {
            signal_group(s.id(), libc::SIGTERM);
            let t0 = Instant::now();
            while s.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(20));
            }
            signal_group(s.id(), libc::SIGKILL);
            let _ = s.wait();
        }
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.stop_group();
        self.stop_servers();
    }
}

fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: plain kill(2) on a process group we created (process_group(0) makes pgid = pid).
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

fn run_loop(
    name: &str,
    spec: &LoadSpec,
    args: &[String],
    work: &Path,
    group: u32,
    stop: &AtomicBool,
    current: &Mutex<Option<u32>>,
) -> Result<LoadOutput> {
    let t0 = Instant::now();
    let mut runs: Vec<RunRecord> = Vec::new();
    loop {
        let mut cmd = Command::new(&args[0]);
        cmd.args(&args[1..])
            .current_dir(work)
            .stdin(Stdio::null())
            .stdout(if spec.discard_stdout {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .stderr(Stdio::piped())
            .process_group(group as i32);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("load `{name}`: starting `{}`", args.join(" ")))?;
        *current.lock().unwrap() = Some(child.id());
        let stdout = child.stdout.take().map(read_all);
        let stderr = child.stderr.take().map(read_all);
        let status = child.wait()?;
        *current.lock().unwrap() = None;
        let stopped = stop.load(Ordering::SeqCst);
        let stdout = stdout
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let stderr = stderr
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        debug!("load {name}: run ended ({status}) after {:?}", t0.elapsed());
        runs.push(RunRecord {
            ok: status.success(),
            stopped,
            stdout,
            stderr,
            status: status.to_string(),
            finished_at: t0.elapsed(),
        });
        let last = runs.last().unwrap();
        if !last.ok && !last.stopped {
            warn!(
                "load {name}: `{}` failed ({}): {}",
                args.join(" "),
                last.status,
                tail(&last.stderr, 4)
            );
            // A broken tool would fail in a tight loop: wait a little before retrying.
            std::thread::sleep(Duration::from_millis(500));
        }
        if stopped || !spec.repeat {
            break;
        }
    }
    let elapsed = t0.elapsed();
    Ok(summarise(name, &spec.throughput, &runs, elapsed))
}

fn read_all<R: Read + Send + 'static>(stream: R) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            // Keep memory bounded for chatty tools.
            if text.len() < 8 << 20 {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    })
}

fn summarise(
    name: &str,
    spec: &ThroughputSpec,
    runs: &[RunRecord],
    elapsed: Duration,
) -> LoadOutput {
    let completed = runs.iter().filter(|r| r.ok).count() as u64;
    let failed = runs.iter().filter(|r| !r.ok && !r.stopped).count() as u64;
    let last_error = runs
        .iter()
        .rev()
        .find(|r| !r.ok && !r.stopped)
        .map(|r| format!("{}: {}", r.status, tail(&r.stderr, 6)));
    let secs = elapsed.as_secs_f64();
    let throughput = match spec {
        ThroughputSpec::Completions { amount, .. } => {
            let last = runs.iter().filter(|r| r.ok).map(|r| r.finished_at).max();
            Some(match last {
                Some(t) if t.as_secs_f64() > 0.0 => amount * completed as f64 / t.as_secs_f64(),
                _ => 0.0,
            })
        }
        ThroughputSpec::Json {
            pointers, scale, ..
        } => {
            let values: Vec<f64> = runs
                .iter()
                .filter_map(|r| json_sum(&r.stdout, pointers))
                .map(|v| v * scale)
                .collect();
            crate::stats::mean(&values)
        }
        ThroughputSpec::Counter { key, .. } => {
            let total: f64 = runs
                .iter()
                .filter_map(|r| {
                    last_counter(&r.stdout, key).or_else(|| last_counter(&r.stderr, key))
                })
                .fold(0.0, |a, b| a + b);
            (secs > 0.0).then(|| total / secs)
        }
        ThroughputSpec::Lines {
            contains, at_start, ..
        } => {
            let matches = |l: &str| {
                if *at_start {
                    l.starts_with(contains.as_str())
                } else {
                    l.contains(contains.as_str())
                }
            };
            let count = runs
                .iter()
                .map(|r| {
                    r.stdout
                        .lines()
                        .chain(r.stderr.lines())
                        .filter(|l| matches(l))
                        .count()
                })
                .sum::<usize>();
            (secs > 0.0).then(|| count as f64 / secs)
        }
    };
    if throughput.is_none() {
        warn!("load {name}: no throughput could be read from its output");
    }
    LoadOutput {
        load: name.to_owned(),
        throughput,
        unit: spec.rate_unit(),
        elapsed_s: secs,
        completed_runs: completed,
        failed_runs: failed,
        last_error,
        process_groups: Vec::new(),
    }
}

/// Sum of the numbers at `pointers` in the JSON document `text` (None if any is missing).
pub fn json_sum(text: &str, pointers: &[String]) -> Option<f64> {
    // Some tools print warnings before the JSON: start at the first '{'.
    let start = text.find('{')?;
    let doc: serde_json::Value = serde_json::from_str(&text[start..]).ok()?;
    pointers
        .iter()
        .map(|p| doc.pointer(p).and_then(serde_json::Value::as_f64))
        .sum()
}

/// The number right after the last occurrence of `key` in `text`.
pub fn last_counter(text: &str, key: &str) -> Option<f64> {
    let mut rest = text;
    let mut last = None;
    while let Some(pos) = rest.find(key) {
        let after = &rest[pos + key.len()..];
        let number: String = after
            .trim_start_matches(' ')
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        if let Ok(v) = number.parse::<f64>() {
            last = Some(v);
        }
        rest = after;
    }
    last
}

/// Loads by name, as in the scenario file.
pub type LoadTable = BTreeMap<String, LoadSpec>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::{Direction, Scale, Threshold};

    fn spec(command: &[&str], throughput: ThroughputSpec) -> LoadSpec {
        LoadSpec {
            description: "test".into(),
            package: "coreutils".into(),
            requires: vec![],
            prepare: vec![],
            servers: vec![],
            command: command.iter().map(|s| s.to_string()).collect(),
            repeat: true,
            discard_stdout: false,
            throughput,
            score: ValueSpec {
                direction: Direction::Higher,
                theta: Threshold::Median,
                scale: Scale::Theta,
                k_v: 4.0,
                gamma_v: 1.0,
                weight: 1.0,
            },
            app_class: "cpu_batch".into(),
        }
    }

    #[test]
    fn missing_tool_names_the_package() {
        let mut s = spec(
            &["asa-no-such-tool-xyz", "-c"],
            ThroughputSpec::Completions {
                amount: 1.0,
                unit: "runs".into(),
            },
        );
        s.package = "asa-imaginary-package".into();
        let err = s.check_tools("imaginary").unwrap_err().to_string();
        assert!(err.contains("asa-no-such-tool-xyz"), "{err}");
        assert!(err.contains("asa-imaginary-package"), "{err}");
        s.command = vec!["sh".into()];
        s.requires = vec![Requirement {
            binary: None,
            path_glob: Some("/nonexistent-asa/linux-source-*.tar.xz".into()),
            package: "linux-source".into(),
        }];
        let err = s.check_tools("kernel").unwrap_err().to_string();
        assert!(err.contains("linux-source"), "{err}");
    }

    #[test]
    fn repeated_command_counts_completions_and_counters() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(
            &["sh", "-c", "echo frame=5; sleep 0.1; echo frame=10"],
            ThroughputSpec::Counter {
                key: "frame=".into(),
                unit: "frames".into(),
            },
        );
        let load = RunningLoad::start("counter", &s, dir.path(), 1).unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let out = load.finish().unwrap();
        assert!(out.completed_runs >= 3, "{out:?}");
        // Each completed run adds 10 frames; the rate is per second of the phase.
        let rate = out.throughput.unwrap();
        assert!(
            (10.0 * 3.0 / 1.5..=10.0 * 8.0 / 0.7).contains(&rate),
            "{out:?}"
        );
        assert_eq!(out.unit, "frames/s");
    }

    #[test]
    fn every_run_of_a_repeated_command_joins_one_process_group_that_ends_with_the_load() {
        let dir = tempfile::tempdir().unwrap();
        let groups = dir.path().join("groups");
        let s = spec(
            &[
                "sh",
                "-c",
                &format!("cut -d' ' -f5 /proc/$$/stat >> {}", groups.display()),
            ],
            ThroughputSpec::Completions {
                amount: 1.0,
                unit: "runs".into(),
            },
        );
        let load = RunningLoad::start("grouped", &s, dir.path(), 1).unwrap();
        let group = load.process_groups()[0];
        std::thread::sleep(Duration::from_millis(500));
        let out = load.finish().unwrap();
        let seen: Vec<u32> = std::fs::read_to_string(&groups)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert!(seen.len() >= 3, "{seen:?}");
        assert!(seen.iter().all(|g| *g == group), "{seen:?} vs {group}");
        assert_eq!(out.process_groups, vec![group]);
        // Nothing of the group runs on (an orphaned run may linger as a zombie until init
        // reaps it: that is not running).
        let running: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or("", |(_, rest)| rest)
                    .split_whitespace()
                    .collect();
                fields.get(2) == Some(&group.to_string().as_str()) && fields.first() != Some(&"Z")
            })
            .collect();
        assert!(running.is_empty(), "still in the load's group: {running:?}");
    }

    #[test]
    fn long_command_is_stopped_and_completions_are_zero() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(
            &["sleep", "30"],
            ThroughputSpec::Completions {
                amount: 1.0,
                unit: "runs".into(),
            },
        );
        let load = RunningLoad::start("sleeper", &s, dir.path(), 1).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let t0 = Instant::now();
        let out = load.finish().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(3));
        assert_eq!(out.throughput, Some(0.0));
        assert_eq!(out.failed_runs, 0, "a stopped run is not a failure");
    }

    #[test]
    fn counters_read_progress_anywhere_in_the_output() {
        let povray = "Rendered 1024 of 76800 pixels (1%)\rRendered 2048 of 76800 pixels (2%)\r";
        assert_eq!(last_counter(povray, "Rendered "), Some(2048.0));
        assert_eq!(last_counter("tokens=3\ntokens=17\n", "tokens="), Some(17.0));
        assert_eq!(last_counter("nothing here", "frame="), None);
        assert_eq!(last_counter("frame=N/A\n", "frame="), None);
    }

    #[test]
    fn a_load_that_always_fails_is_an_error_with_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(
            &["sh", "-c", "echo 'No module named numpy' >&2; exit 1"],
            ThroughputSpec::Counter {
                key: "tokens=".into(),
                unit: "tokens".into(),
            },
        );
        let load = RunningLoad::start("broken", &s, dir.path(), 1).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let err = load.finish().unwrap_err().to_string();
        assert!(
            err.contains("broken") && err.contains("No module named numpy"),
            "{err}"
        );
    }

    #[test]
    fn line_counts_follow_kbuild_output() {
        let dir = tempfile::tempdir().unwrap();
        let script = "printf 'make: Entering directory\\n  CC      a.o\\n  HOSTCC  b\\n  LD      c\\nwarning:  CC x\\n'";
        let mut s = spec(
            &["sh", "-c", script],
            ThroughputSpec::Lines {
                contains: "  ".into(),
                at_start: true,
                unit: "steps".into(),
            },
        );
        s.repeat = false;
        let out = RunningLoad::start("kbuild", &s, dir.path(), 1)
            .unwrap()
            .finish()
            .unwrap();
        // 3 kbuild steps in elapsed seconds.
        let steps = out.throughput.unwrap() * out.elapsed_s;
        assert!((steps - 3.0).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn parsers_read_tool_output() {
        let text = "warning: x\n{\"end\": {\"sum\": {\"bps\": 2.5e9}}, \"a\": [1, 2]}";
        assert_eq!(json_sum(text, &["/end/sum/bps".into()]), Some(2.5e9));
        assert_eq!(json_sum(text, &["/a/0".into(), "/a/1".into()]), Some(3.0));
        assert_eq!(json_sum(text, &["/missing".into()]), None);
        assert_eq!(
            last_counter("frame=1\nfps=3\nframe=42\nprogress=end\n", "frame="),
            Some(42.0)
        );
        assert_eq!(
            expand("{work}/x -j{cpus} -t {seconds}", Path::new("/w"), 0),
            format!("/w/x -j{} -t 1", cpus())
        );
    }

    #[test]
    fn corpus_is_deterministic_text_of_the_requested_size() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        write_text_corpus(&a, 100_000).unwrap();
        write_text_corpus(&b, 100_000).unwrap();
        let ta = std::fs::read(&a).unwrap();
        assert_eq!(ta.len(), 100_000);
        assert_eq!(ta, std::fs::read(&b).unwrap());
        assert!(ta.iter().all(|c| c.is_ascii()));
    }
}

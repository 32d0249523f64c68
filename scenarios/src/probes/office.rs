//! Office-like probe: typing into a document with periodic autosave, standing for LibreOffice
//! Writer driven through UNO. Keystrokes come in words (`word_min..=word_max` keys,
//! `key_gap_min_ms..key_gap_max_ms` apart, a `word_gap_ms` pause between words). Each key
//! needs `key_work_ms` on the editor thread (insert, re-layout of the paragraph, spell check)
//! while it holds the document, then a frame on the render thread (`render_ms`). Input latency
//! = frame shown − key due. Every `autosave_interval_ms` an autosave thread snapshots the
//! document (holding it only for the copy), serialises it (`autosave_work_ms`), writes it to a
//! temporary file and calls `fsync`: bursty background CPU + I/O inside the application.
//!
//! Limits: no real text layout, fonts, or UNO IPC; the document is a byte buffer. It measures
//! short, frequent input handling competing with the application's own autosave and the
//! background load.

use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

use super::{non_negative, positive, running, ProbeOutput};
use crate::clock::{ms_between, now_ns, sleep_until_ns, Rng};
use crate::work::WorkUnit;

/// Summary metrics of the office probe.
pub const SUMMARY: &[(&str, &str)] = &[
    ("input_latency_p50_ms", "ms"),
    ("input_latency_p99_ms", "ms"),
    ("autosave_p99_ms", "ms"),
    ("keystrokes", "count"),
];

/// Raw-sample series of the office probe.
pub const SAMPLES: &[(&str, &str)] = &[("input_latency_ms", "ms"), ("autosave_ms", "ms")];

/// Settings of the office probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OfficeSettings {
    /// Editor work per keystroke (ms).
    pub key_work_ms: f64,
    /// Render work per keystroke (ms).
    pub render_ms: f64,
    /// Fewest keys in a word.
    pub word_min: u64,
    /// Most keys in a word.
    pub word_max: u64,
    /// Shortest gap between keys (ms).
    pub key_gap_min_ms: f64,
    /// Longest gap between keys (ms).
    pub key_gap_max_ms: f64,
    /// Pause between words (ms).
    pub word_gap_ms: f64,
    /// Autosave interval (ms).
    pub autosave_interval_ms: f64,
    /// Serialisation work per autosave (ms).
    pub autosave_work_ms: f64,
    /// Size of the document at the start (KiB); it is written on every autosave.
    pub document_kib: u64,
    /// Seed of the typing timeline.
    pub seed: u64,
}

impl Default for OfficeSettings {
    fn default() -> Self {
        Self {
            key_work_ms: 1.5,
            render_ms: 1.0,
            word_min: 3,
            word_max: 8,
            key_gap_min_ms: 60.0,
            key_gap_max_ms: 160.0,
            word_gap_ms: 250.0,
            autosave_interval_ms: 2000.0,
            autosave_work_ms: 15.0,
            document_kib: 512,
            seed: 7,
        }
    }
}

impl OfficeSettings {
    /// Check ranges.
    pub fn validate(&self) -> Result<()> {
        positive("key_work_ms", self.key_work_ms)?;
        non_negative("render_ms", self.render_ms)?;
        positive("key_gap_min_ms", self.key_gap_min_ms)?;
        non_negative("word_gap_ms", self.word_gap_ms)?;
        positive("autosave_interval_ms", self.autosave_interval_ms)?;
        non_negative("autosave_work_ms", self.autosave_work_ms)?;
        if self.word_min == 0 || self.word_max < self.word_min {
            anyhow::bail!("probe settings need 1 <= `word_min` <= `word_max`");
        }
        if self.key_gap_max_ms < self.key_gap_min_ms {
            anyhow::bail!("probe setting `key_gap_max_ms` must be >= `key_gap_min_ms`");
        }
        Ok(())
    }
}

/// Run the office probe.
pub fn run(
    s: &OfficeSettings,
    duration: Duration,
    work: WorkUnit,
    stop: &Arc<AtomicBool>,
) -> Result<ProbeOutput> {
    let start = now_ns();
    let end = start + duration.as_nanos() as u64;
    let document = Arc::new(Mutex::new(vec![b'x'; (s.document_kib * 1024) as usize]));
    let save_dir = std::env::temp_dir().join(format!("asa-office-probe-{}", std::process::id()));
    std::fs::create_dir_all(&save_dir)
        .with_context(|| format!("creating the autosave folder {}", save_dir.display()))?;

    let (to_editor, editor_rx) = mpsc::channel::<(u64, u8)>();
    let (to_render, render_rx) = mpsc::channel::<u64>();
    let render_ms = s.render_ms;
    let render = std::thread::Builder::new()
        .name("probe-office-render".into())
        .spawn(move || {
            let mut latencies = Vec::new();
            for due in render_rx {
                std::hint::black_box(work.spin(render_ms));
                latencies.push(ms_between(due, now_ns()));
            }
            latencies
        })
        .context("spawning the office render thread")?;
    let (doc_e, key_work_ms) = (document.clone(), s.key_work_ms);
    let editor = std::thread::Builder::new()
        .name("probe-office-editor".into())
        .spawn(move || {
            for (due, key) in editor_rx {
                {
                    let mut doc = doc_e.lock().unwrap();
                    doc.push(key);
                    std::hint::black_box(work.spin(key_work_ms));
                }
                if to_render.send(due).is_err() {
                    break;
                }
            }
        })
        .context("spawning the office editor thread")?;
    let (doc_a, stop_a) = (document.clone(), stop.clone());
    let (interval, save_work) = ((s.autosave_interval_ms * 1e6) as u64, s.autosave_work_ms);
    let save_file = save_dir.join("document.autosave");
    let autosave = std::thread::Builder::new()
        .name("probe-office-autosave".into())
        .spawn(move || -> Result<Vec<f64>> {
            let mut times = Vec::new();
            let mut next = start + interval;
            while next < end && running(&stop_a, end) {
                sleep_until_ns(next);
                let t0 = now_ns();
                let snapshot = doc_a.lock().unwrap().clone();
                std::hint::black_box(work.spin(save_work));
                let mut f = std::fs::File::create(&save_file)
                    .with_context(|| format!("creating {}", save_file.display()))?;
                f.write_all(&snapshot)?;
                f.sync_all()?;
                times.push(ms_between(t0, now_ns()));
                next += interval;
            }
            Ok(times)
        })
        .context("spawning the office autosave thread")?;

    let mut rng = Rng::new(s.seed);
    let mut due = start;
    'outer: while running(stop, end) {
        due += (s.word_gap_ms * 1e6) as u64;
        for _ in 0..rng.int(s.word_min, s.word_max) {
            due += (rng.uniform(s.key_gap_min_ms, s.key_gap_max_ms) * 1e6) as u64;
            if due >= end {
                break 'outer;
            }
            sleep_until_ns(due);
            let key = b'a' + rng.int(0, 25) as u8;
            if !running(stop, end) || to_editor.send((due, key)).is_err() {
                break 'outer;
            }
        }
    }
    drop(to_editor);
    editor
        .join()
        .map_err(|_| anyhow!("office editor thread panicked"))?;
    let latencies = render
        .join()
        .map_err(|_| anyhow!("office render thread panicked"))?;
    let saves = autosave
        .join()
        .map_err(|_| anyhow!("office autosave thread panicked"))??;
    let _ = std::fs::remove_dir_all(&save_dir);

    let mut out = ProbeOutput {
        kind: "office".into(),
        elapsed_s: ms_between(start, now_ns()) / 1e3,
        ..Default::default()
    };
    out.add_percentiles("input_latency", &latencies);
    if let Some(p99) = crate::stats::percentile(&saves, 99.0) {
        out.summary.insert("autosave_p99_ms".into(), p99);
    }
    out.summary
        .insert("keystrokes".into(), latencies.len() as f64);
    out.samples.insert("input_latency_ms".into(), latencies);
    out.samples.insert("autosave_ms".into(), saves);
    Ok(out)
}

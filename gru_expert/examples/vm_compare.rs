//! Compares EEVDF, scx_gru (with the committed model), scx_gru --no-model (its
//! fallback policy alone), scx_gru --inference-budget-pct 0 (events and
//! threads, no inference) and scx_bpfland on the
//! thesis's kinds of load, in one lab VM run, and prints ratios to EEVDF.
//!
//! `cargo run -p asa-gru-expert --example vm_compare` (ONNX Runtime from
//! `ORT_DYLIB_PATH` or `gru_expert/setup_ort.sh`)
//! (needs the lab: qemu, the cached kernel, scx_bpfland from lab/setup.sh, stress-ng and perf).
//!
//! Loads (stress-ng / perf bench stand in for sysbench and hackbench, which are not installed):
//! cpu1 `stress-ng --cpu 1`, cpu8 `stress-ng --cpu 8`, io `stress-ng --hdd 2`, mixed
//! `stress-ng --cpu 2 --hdd 1 --switch 2`, messaging `perf bench sched messaging -g 4 -l 30`.
//! Per run: throughput (sum of stress-ng's bogo ops/s, real time), context switches and CPU
//! migrations (`perf stat -a`), wall time. TCG timings are noisy: one run, ratios only;
//! every load runs once unmeasured first (TCG warm-up).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use asa_lab::{GuestRun, Lab};

const SCHEDULERS: [&str; 5] = ["eevdf", "gru", "gru-noinfer", "gru-fallback", "bpfland"];
const LOADS: [&str; 5] = ["cpu1", "cpu8", "io", "mixed", "messaging"];

const SCRIPT: &str = r##"
set -u
out=/lab/out
measure() {
  s=$1; l=$2; shift 2
  t0=$(cut -d' ' -f1 /proc/uptime)
  perf stat -a -e context-switches,cpu-migrations -x, -o $out/perf-$s-$l.txt -- "$@" > $out/load-$s-$l.txt 2>&1
  rc=$?
  t1=$(cut -d' ' -f1 /proc/uptime)
  echo "$s $l $rc $t0 $t1" >> $out/runs.txt
}
loads() {
  measure $1 cpu1 stress-ng --cpu 1 --timeout 6 --metrics-brief
  measure $1 cpu8 stress-ng --cpu 8 --timeout 6 --metrics-brief
  measure $1 io stress-ng --hdd 2 --hdd-bytes 8M --timeout 6 --metrics-brief
  measure $1 mixed stress-ng --cpu 2 --hdd 1 --hdd-bytes 8M --switch 2 --timeout 6 --metrics-brief
  measure $1 messaging perf bench sched messaging -g 4 -l 30
}
waitstate() { i=0; while [ "$(cat /sys/kernel/sched_ext/state)" != $1 ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; }
cd /tmp
# Warm-up pass (not reported): TCG translates code on first use, which would
# slow down whichever scheduler runs first.
loads warmup
loads eevdf
scx_gru --stats-file $out/gru-stats.json > $out/gru.log 2>&1 &
P=$!; waitstate enabled
echo "# gru $(cat /sys/kernel/sched_ext/root/ops)" >> $out/runs.txt
loads gru
kill -INT $P; wait $P; waitstate disabled
scx_gru --inference-budget-pct 0 --stats-file $out/gru-noinfer-stats.json > $out/gru-noinfer.log 2>&1 &
P=$!; waitstate enabled
loads gru-noinfer
kill -INT $P; wait $P; waitstate disabled
scx_gru --no-model --stats-file $out/gru-fallback-stats.json > $out/gru-fallback.log 2>&1 &
P=$!; waitstate enabled
loads gru-fallback
kill -INT $P; wait $P; waitstate disabled
scx_bpfland > $out/bpfland.log 2>&1 &
P=$!; waitstate enabled
echo "# bpfland $(cat /sys/kernel/sched_ext/root/ops)" >> $out/runs.txt
loads bpfland
kill -INT $P; wait $P; waitstate disabled
"##;

/// Measurements of one scheduler on one load.
#[derive(Debug, Default, Clone)]
struct Run {
    throughput: Option<f64>,
    context_switches: Option<f64>,
    migrations: Option<f64>,
    wall_s: f64,
}

/// Sum of the "bogo ops/s (real time)" column of `stress-ng --metrics-brief`.
fn stress_ng_throughput(text: &str) -> Option<f64> {
    let mut sum = 0.0;
    let mut found = false;
    for line in text.lines().filter(|l| l.contains("metrc:")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // stress-ng: metrc: [pid] name ops real usr sys ops/s(real) ops/s(usr+sys)
        if fields.len() >= 10 {
            if let Ok(v) = fields[8].parse::<f64>() {
                sum += v;
                found = true;
            }
        }
    }
    found.then_some(sum)
}

/// 1 / "Total time" of `perf bench sched messaging` (runs per second).
fn messaging_throughput(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains("Total time:"))?;
    let secs: f64 = line.split_whitespace().nth(2)?.parse().ok()?;
    (secs > 0.0).then(|| 1.0 / secs)
}

/// A counter from `perf stat -x,` output.
fn perf_counter(text: &str, event: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.split(',').nth(2) == Some(event))
        .and_then(|l| l.split(',').next()?.parse().ok())
}

fn main() -> Result<()> {
    let ort = asa_gru_expert::model::find_ort_library()?;
    let exe = std::env::current_exe()?;
    let scx_gru = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("scx_gru"))
        .filter(|p| p.exists())
        .context("build scx_gru first: cargo build -p asa-gru-expert")?;
    let lab = Lab::new().context("the lab is set up (run lab/setup.sh)")?;
    let mut run = GuestRun::new("gru-compare", SCRIPT);
    run.executables
        .push((scx_gru, PathBuf::from("/usr/local/bin/scx_gru")));
    run.executables.push((
        ort,
        PathBuf::from("/usr/local/lib/scx_gru/libonnxruntime.so"),
    ));
    let model_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("model");
    for file in ["gru.toml", "gru.onnx"] {
        run.files.push((
            model_dir.join(file),
            Path::new("/usr/local/share/scx_gru").join(file),
        ));
    }
    run.experts = vec!["bpfland".into()];
    run.host_tools = vec!["stress-ng".into(), "perf".into()];
    run.vm.timeout = Duration::from_secs(900);
    let outcome = lab.run(&run).context("the lab VM ran")?;
    let runs_txt = outcome.read_out("runs.txt")?;

    let mut table: BTreeMap<(String, String), Run> = BTreeMap::new();
    for line in runs_txt.lines() {
        if line.starts_with('#') {
            println!("{line}");
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 5 {
            bail!("bad runs.txt line {line:?}");
        }
        let (sched, load, rc) = (f[0], f[1], f[2]);
        if rc != "0" {
            bail!(
                "{sched}/{load} failed with status {rc}: {}",
                outcome.read_out(&format!("load-{sched}-{load}.txt"))?
            );
        }
        let text = outcome.read_out(&format!("load-{sched}-{load}.txt"))?;
        let perf = outcome.read_out(&format!("perf-{sched}-{load}.txt"))?;
        let throughput = if load == "messaging" {
            messaging_throughput(&text)
        } else {
            stress_ng_throughput(&text)
        };
        table.insert(
            (sched.to_owned(), load.to_owned()),
            Run {
                throughput,
                context_switches: perf_counter(&perf, "context-switches"),
                migrations: perf_counter(&perf, "cpu-migrations"),
                wall_s: f[4].parse::<f64>()? - f[3].parse::<f64>()?,
            },
        );
    }

    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.3}", a / b),
        _ => "-".into(),
    };
    println!("| load | scheduler | throughput | ctx switches | migrations | wall s | thr/EEVDF | cs/EEVDF | mig/EEVDF |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for load in LOADS {
        let base = table
            .get(&("eevdf".into(), load.into()))
            .cloned()
            .unwrap_or_default();
        for sched in SCHEDULERS {
            let Some(r) = table.get(&(sched.into(), load.into())) else {
                continue;
            };
            println!(
                "| {load} | {sched} | {} | {} | {} | {:.2} | {} | {} | {} |",
                fmt(r.throughput),
                fmt(r.context_switches),
                fmt(r.migrations),
                r.wall_s,
                ratio(r.throughput, base.throughput),
                ratio(r.context_switches, base.context_switches),
                ratio(r.migrations, base.migrations),
            );
        }
    }
    if let Ok(stats) = outcome.read_out("gru-stats.json") {
        println!("\nscx_gru stats at exit:\n{stats}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stress_ng_perf_and_messaging() {
        let s = "stress-ng: metrc: [225] cpu                  86      8.14      3.22      0.31        10.56          24.38\n\
                 stress-ng: metrc: [225] switch             5509      8.04      0.32      3.16       685.21        1583.72\n";
        assert_eq!(stress_ng_throughput(s), Some(10.56 + 685.21));
        assert_eq!(
            perf_counter(
                "83,,context-switches,2063609346,100.00,,\n5,,cpu-migrations,1,100.00,,",
                "cpu-migrations"
            ),
            Some(5.0)
        );
        assert_eq!(
            messaging_throughput("     Total time: 2.000 [sec]"),
            Some(0.5)
        );
    }
}

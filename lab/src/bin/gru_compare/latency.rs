//! Wakeup-to-run latency of every task, for every scheduler alike (`--wakeup-latency`).
//!
//! The guest runs `asa record` (the agent's perception: BTF tracepoints on sched_wakeup and
//! sched_switch, a log2 histogram of the time from a task's wake-up to its switch-in, p50 and
//! p99 per tick) around each load, writing one CSV row per 1 s tick. Only the ticks that lie
//! wholly inside the load count. schedstat (`schedstat.rs`) gives mean waits; this gives the
//! tail, which the thesis read from `perf sched latency`'s max column and which schedstat does
//! not keep for sched_ext tasks. The probes run on every switch, so this is a profiling run
//! (like `--bpf-prog-stats`), not a throughput one. The recorder runs SCHED_FIFO (`chrt -f
//! 50`), above sched_ext and EEVDF alike: at normal priority it got no tick in during
//! hackbench's 160 processes, and the instrument must not depend on the scheduler measured.

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

/// Shell functions of the guest script: `lat_start CSV` starts the recorder (if `LAT=1`) and
/// waits for its BPF probes to attach; `lat_mark FILE` appends the wall clock in ms;
/// `lat_stop` stops the recorder (SIGINT: it closes the file).
pub const RECORD_SHELL: &str = r#"LAT=__LAT__
LP=
lat_start() {
  if [ $LAT = 1 ]; then
    chrt -f 50 asa record --label vm_compare --out $1 --interval-ms 1000 > $1.log 2>&1 &
    LP=$!
    i=0; while [ ! -s $1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  fi
}
lat_mark() { if [ $LAT = 1 ]; then date +%s%3N >> $1; fi; }
lat_stop() { if [ -n "$LP" ]; then kill -INT $LP; wait $LP; LP=; fi; }
"#;

/// The CSV columns read (names of `agent/feature_schema.toml`).
const P50: &str = "sched_wakeup_latency_p50_us";
const P99: &str = "sched_wakeup_latency_p99_us";
const WAKEUPS: &str = "sched_wakeups_per_s";

/// Wakeup-to-run latency during one load: over the 1 s ticks wholly inside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WakeLatency {
    /// Ticks inside the load.
    pub ticks: usize,
    /// Wake-ups per second (mean over the ticks).
    pub wakeups_per_s: f64,
    /// The median tick's p50, µs.
    pub p50_us: f64,
    /// The median tick's p99, µs.
    pub p99_us: f64,
    /// The worst tick's p99, µs.
    pub p99_worst_us: f64,
}

/// Reads `asa record`'s CSV `csv` over the load from `start_ms` to `end_ms` (wall clock):
/// a row is the tick that ends at its `unix_ms`, 1 s long, and counts when it lies inside.
pub fn from_record(csv: &str, start_ms: u64, end_ms: u64) -> Result<WakeLatency> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .context("empty recording")?
        .split(',')
        .collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .with_context(|| format!("the recording has no column {name}"))
    };
    let (t, p50, p99, wakeups) = (col("unix_ms")?, col(P50)?, col(P99)?, col(WAKEUPS)?);
    let mut rows = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        // The numeric columns come before the label and the quoted missing list.
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| -> Result<f64> {
            f.get(i)
                .with_context(|| format!("short row {line:?}"))?
                .parse::<f64>()
                .with_context(|| format!("row {line:?}"))
        };
        let end = num(t)? as u64;
        if end >= start_ms + 1000 && end <= end_ms {
            rows.push((num(p50)?, num(p99)?, num(wakeups)?));
        }
    }
    ensure!(
        !rows.is_empty(),
        "no whole tick inside the load ({start_ms}..{end_ms} ms)"
    );
    ensure!(
        rows.iter().all(|r| !r.0.is_nan() && !r.1.is_nan()),
        "the wakeup latency is missing in the recording (did the BPF probes load?)"
    );
    // (rows is not empty, so neither median is None.)
    let median = |v: Vec<f64>| crate::stats::median(v).unwrap_or(f64::NAN);
    Ok(WakeLatency {
        ticks: rows.len(),
        wakeups_per_s: rows.iter().map(|r| r.2).sum::<f64>() / rows.len() as f64,
        p50_us: median(rows.iter().map(|r| r.0).collect()),
        p99_us: median(rows.iter().map(|r| r.1).collect()),
        p99_worst_us: rows.iter().map(|r| r.1).fold(0.0, f64::max),
    })
}

/// The two wall-clock marks (ms) `lat_mark` wrote around a load.
pub fn span(marks: &str) -> Result<(u64, u64)> {
    let v: Vec<u64> = marks
        .split_whitespace()
        .map(|m| m.parse().with_context(|| format!("mark {m:?}")))
        .collect::<Result<_>>()?;
    ensure!(
        v.len() == 2 && v[0] <= v[1],
        "want two ordered marks: {marks:?}"
    );
    Ok((v[0], v[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "unix_ms,tick,cpu_user_share,sched_wakeups_per_s,sched_wakeup_latency_p50_us,sched_wakeup_latency_p99_us,label,missing
1000,0,0.1,100,5,50,vm_compare,\"\"
2000,1,0.9,1000,10,400,vm_compare,\"a,b\"
3000,2,0.9,3000,20,800,vm_compare,\"\"
4000,3,0.9,2000,30,200,vm_compare,\"\"
5000,4,0.1,100,1,9000,vm_compare,\"\"
";

    #[test]
    fn only_ticks_inside_the_load_count() {
        // Load from 1.0 s to 4.2 s: the ticks ending at 2, 3 and 4 s lie inside.
        let l = from_record(CSV, 1000, 4200).unwrap();
        assert_eq!(l.ticks, 3);
        assert_eq!(l.wakeups_per_s, 2000.0);
        assert_eq!(l.p50_us, 20.0);
        assert_eq!(l.p99_us, 400.0);
        assert_eq!(l.p99_worst_us, 800.0);
        // Starting at 1.5 s, the tick ending at 2 s began before the load.
        assert_eq!(from_record(CSV, 1500, 4200).unwrap().ticks, 2);
    }

    #[test]
    fn bad_recordings_are_errors() {
        assert!(from_record("", 0, 10_000).is_err());
        assert!(from_record(CSV, 10_000, 20_000).is_err(), "no tick inside");
        let no_bpf = CSV.replace(",50,", ",nan,").replace(",400,", ",nan,");
        let err = from_record(&no_bpf, 0, 10_000).unwrap_err().to_string();
        assert!(err.contains("BPF"), "{err}");
        let other_schema = CSV.replace("sched_wakeup_latency_p99_us", "x");
        assert!(from_record(&other_schema, 0, 10_000).is_err());
    }

    #[test]
    fn marks_give_the_span() {
        assert_eq!(
            span("1700000000123\n1700000010456\n").unwrap(),
            (1700000000123, 1700000010456)
        );
        assert!(span("5\n").is_err());
        assert!(span("9\n5\n").is_err());
    }
}

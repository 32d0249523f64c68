//! Where the scheduler's user-space process spends its CPU time during each load
//! (`--profile-scheduler`).
//!
//! The "sched CPU %" column says how much CPU the process takes; this says on what. The guest
//! runs `perf record -e cpu-clock -p PID` on the scheduler's process around every load (user and
//! kernel samples of all its threads: the syscalls it makes count) and `perf report` flattens the
//! samples by shared object and symbol. A profiling run: perf's sampling takes CPU from the
//! guest (under TCG the timer interrupt is emulated), so its throughput figures are not the
//! ones to compare.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

/// Shell functions of the guest script: `prof_start FILE` starts perf on the scheduler's
/// process `$P` (if `PROF=1` and a scheduler runs), `prof_stop FILE` stops it (SIGINT) and
/// writes the flat report to FILE (and one by thread and shared object to FILE.threads, read by
/// hand).
pub const PROFILE_SHELL: &str = r#"PROF=__PROF__
PP=
prof_start() {
  if [ $PROF = 1 ] && [ -n "$P" ]; then
    perf record --no-buildid -q -e cpu-clock -F 999 -p $P -o $1.data > $1.log 2>&1 &
    PP=$!
    sleep 0.3
  fi
}
prof_stop() {
  if [ -n "$PP" ]; then
    kill -INT $PP; wait $PP; PP=
    perf report -i $1.data --stdio --no-children --sort dso,sym -F overhead,sample,dso,sym \
      --percent-limit 0 > $1 2>> $1.log
    perf report -i $1.data --stdio --no-children --sort pid,dso -F overhead,sample,pid,dso \
      --percent-limit 0 > $1.threads 2>> $1.log
    perf script -i $1.data -F tid,time,ip,sym,dso > $1.script 2>> $1.log
    rm -f $1.data
  fi
}
"#;

/// Samples by "shared object: symbol", from `perf report --stdio -F overhead,sample,dso,sym`.
/// Lines are `  12.50%   25  scx_gru  [.] symbol`: the percentage, the samples, the shared
/// object, `[.]` (user) or `[k]` (kernel), then the symbol, which may hold spaces.
pub fn parse_report(report: &str) -> Result<BTreeMap<String, u64>> {
    let mut samples = BTreeMap::new();
    for line in report.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split_whitespace();
        let (Some(pct), Some(count), Some(dso), Some(mode)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if !pct.ends_with('%') {
            continue;
        }
        let count: u64 = count
            .parse()
            .with_context(|| format!("no sample count in the perf report line {line:?}"))?;
        let symbol = f.collect::<Vec<_>>().join(" ");
        let key = format!("{dso}: {mode} {symbol}");
        *samples.entry(key).or_insert(0) += count;
    }
    Ok(samples)
}

/// Adds `other`'s samples into `into`.
pub fn merge(into: &mut BTreeMap<String, u64>, other: &BTreeMap<String, u64>) {
    for (k, v) in other {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

/// The `top` symbols with the most samples, with their share of all samples, most first (ties
/// by name), and the total.
pub fn top(samples: &BTreeMap<String, u64>, top: usize) -> (u64, Vec<(String, u64, f64)>) {
    let total: u64 = samples.values().sum();
    let mut rows: Vec<(&String, &u64)> = samples.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let rows = rows
        .into_iter()
        .take(top)
        .map(|(k, v)| (k.clone(), *v, *v as f64 * 100.0 / total.max(1) as f64))
        .collect();
    (total, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "# To display the perf.data header info, please use --header/--header-only options.\n\
#\n\
# Total Lost Samples: 0\n\
#\n\
# Samples: 40  of event 'cpu-clock'\n\
# Event count (approx.): 40040040\n\
#\n\
# Overhead       Samples  Shared Object      Symbol\n\
# ........  ............  .................  ..............\n\
#\n\
    50.00%            20  [kernel.kallsyms]  [k] _raw_spin_unlock_irqrestore\n\
    25.00%            10  scx_gru            [.] asa_gru_expert::features::TaskWindows::push\n\
    20.00%             8  libc.so.6          [.] __memmove_avx_unaligned_erms\n\
     5.00%             2  scx_gru            [.] <alloc::string::String as core::fmt::Write>::write_str\n\
\n\
#\n\
# (Tip: ...)\n\
#\n";

    #[test]
    fn reads_a_flat_perf_report() {
        let s = parse_report(REPORT).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s["[kernel.kallsyms]: [k] _raw_spin_unlock_irqrestore"], 20);
        assert_eq!(
            s["scx_gru: [.] <alloc::string::String as core::fmt::Write>::write_str"], 2,
            "a symbol with spaces stays whole"
        );
        let mut both = s.clone();
        merge(&mut both, &s);
        let (total, rows) = top(&both, 2);
        assert_eq!(total, 80);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].1, 40);
        assert!((rows[0].2 - 50.0).abs() < 1e-9);
        assert_eq!(
            rows[1].0,
            "scx_gru: [.] asa_gru_expert::features::TaskWindows::push"
        );
        assert!(parse_report("    12.00%   many  scx_gru  [.] f\n").is_err());
        assert!(parse_report("").unwrap().is_empty());
    }
}

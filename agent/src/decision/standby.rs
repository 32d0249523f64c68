//! Which experts stand by: the hot-standby pool the supervisor keeps loaded and held at their
//! attach gates (see `asa_experts::supervisor`), so that the switches the agent is likely to
//! make next are only "stop the old one, release the gate".
//!
//! Pure logic in three steps, each tested on its own, and one check on the pool's state:
//! * [`vote_candidates`] (decision thread, every tick): the experts the mapping table gives for
//!   the classes in order of their vote scores, best first;
//! * [`insurance_standby`] (decision thread, every tick): the policy's insurance expert (the
//!   table's overall best, or its runner-up while the overall best runs), offered only while
//!   the machine has CPU to spare;
//! * [`wanted_standby`] (controller): from those candidates and the table's overall best, the
//!   standbys wanted now, without the running expert and EEVDF, bounded by a count and a
//!   memory budget (each expert's last measured memory, resident plus BPF, or an estimate);
//! * [`loading_during`] (decision thread, every tick): whether a standby was loading while
//!   the tick's sample was taken, so that the policy leaves that tick out of the vote.

use std::collections::BTreeMap;

use asa_experts::supervisor::{StandbyInfo, StandbyState};
use serde::{Deserialize, Serialize};

/// Default number of hot standbys. Measured in the lab VM (TCG, 2 vCPUs, 2 GiB,
/// `results/2026-11-27-standby-switch-times/`, `…-standby-foreground-cost/`): a parked
/// standby takes no CPU and 8.6 MiB resident (bpfland), 7.7 MiB plus 77 MiB of BPF maps in the
/// kernel (rusty) or 14.8 plus 2 MiB (lavd), and loads once at nice 19; a switch to it takes
/// well under a second where a gated start takes 1–26 s. Two cover the usual next step (the
/// next-voted class's expert and the table's overall best) within ~100 MiB; the catalogue has
/// four BPF experts, so three would hold every other one and leave the policy nothing to choose.
pub const DEFAULT_STANDBY: usize = 2;
/// The least default memory budget of the pool (MiB over all standbys, resident plus BPF
/// kernel memory): rusty and lavd parked together take 102 MiB in the lab.
pub const DEFAULT_STANDBY_MEMORY_MIB: u64 = 256;
/// The share of the machine's memory the pool may take by default: a tenth. scx_layered, the
/// per-application expert, parks at 181 MiB resident plus 165 MiB of BPF maps (lab VM, 2 vCPUs,
/// 4 GiB, 2026-11-30): a tenth of 4 GiB holds it, 256 MiB does not.
pub const DEFAULT_STANDBY_MEMORY_SHARE: f64 = 0.1;

/// The pool's default memory budget (KiB) on a machine with `mem_total_kib` of memory (unknown:
/// none): [`DEFAULT_STANDBY_MEMORY_SHARE`] of it, at least [`DEFAULT_STANDBY_MEMORY_MIB`].
pub fn default_standby_memory_kib(mem_total_kib: Option<u64>) -> u64 {
    let share = mem_total_kib.map_or(0, |t| (t as f64 * DEFAULT_STANDBY_MEMORY_SHARE) as u64);
    share.max(DEFAULT_STANDBY_MEMORY_MIB * 1024)
}

/// The machine's memory (MemTotal of /proc/meminfo, KiB), if it can be read.
pub fn mem_total_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
/// The memory assumed for an expert never measured yet (KiB), so that one is tried: twice
/// lavd's 16.8 MiB, rounded (rusty's 85 MiB is then learned when it parks).
pub const UNMEASURED_RSS_KIB: u64 = 32 * 1024;

/// Bounds of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyBounds {
    /// At most this many standbys (0: none).
    pub max: usize,
    /// At most this much memory over all standbys, resident plus BPF (KiB).
    pub memory_kib: u64,
}

impl Default for StandbyBounds {
    /// [`DEFAULT_STANDBY`] experts within [`default_standby_memory_kib`] of this machine.
    fn default() -> Self {
        Self {
            max: DEFAULT_STANDBY,
            memory_kib: default_standby_memory_kib(mem_total_kib()),
        }
    }
}

/// The experts mapped to the voted classes, in order of the classes' vote scores (highest
/// first, ties by class name; classes with no score, or mapped to nothing, are skipped), each
/// once.
pub fn vote_candidates<'a>(
    vote_scores: &BTreeMap<String, f64>,
    expert_for: impl Fn(&str) -> Option<&'a str>,
) -> Vec<String> {
    let mut classes: Vec<(&String, f64)> = vote_scores
        .iter()
        .filter(|(_, s)| **s > 0.0)
        .map(|(c, s)| (c, *s))
        .collect();
    classes.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut out: Vec<String> = Vec::new();
    for (class, _) in classes {
        if let Some(expert) = expert_for(class) {
            if !out.iter().any(|e| e == expert) {
                out.push(expert.to_owned());
            }
        }
    }
    out
}

/// The idle CPU (CPUs' worth, over the last tick's sample) the machine must have for the
/// table's overall best to start loading as a standby when no class of the vote asks for it:
/// 1.5 CPUs, a whole one for the verifier and half of one for the workload's bursts. A standby
/// loads at nice 19, but its BPF verification still takes a CPU the workload may need. In the
/// lab VM (2 vCPUs) scx_layered loading beside archive extraction under cosmos took 50 s and the
/// load ran at 0.69-0.79 of its throughput under cosmos alone
/// (results/2026-11-30-load-model-under-layered, second live check); beside LLM inference, which
/// left 0.5-1 CPU idle, it took 16-22 s of the CPU the audio probe needed: 29 and 42 underruns a
/// minute against 6 and 11 under cosmos alone (results/2026-11-30-per-app-eval, S25); a loading
/// lavd took 15 % of a CPU hog's work (results/2026-11-27-standby-foreground-cost). The overall
/// best is insurance for a later fallback (which, without it, starts the default expert while
/// the running one keeps scheduling): it waits for a quiet machine, while the vote's candidates
/// (the switch the agent is about to make) load at once.
pub const INSURANCE_MIN_IDLE_CPUS: f64 = 1.5;

/// The table's overall best as the pool's insurance slot ([`wanted_standby`]'s
/// `overall_best`): given while the last sample left at least [`INSURANCE_MIN_IDLE_CPUS`] idle,
/// or when the idle CPU is unknown. A standby already loading or parked keeps its slot through
/// `keep`, so a busy spell does not stop one half loaded.
pub fn insurance_standby(overall_best: Option<&str>, idle_cpus: Option<f64>) -> Option<&str> {
    overall_best.filter(|_| idle_cpus.is_none_or(|idle| idle >= INSURANCE_MIN_IDLE_CPUS))
}

/// The standbys wanted, most wanted first: the vote's candidates, with the table's overall
/// best taking the last slot when the candidates would not leave it one, then the standbys
/// already in the pool (`keep`: a loaded standby keeps a slot no wanted expert needs, so the
/// pool does not churn as the vote's minor classes come and go); never `running`,
/// never `kernel_default` (EEVDF has nothing to load), each once; at most `bounds.max`, and an
/// expert whose memory (`rss_kib`: resident plus BPF, else [`UNMEASURED_RSS_KIB`]) would take the pool
/// over `bounds.memory_kib` is left out (a smaller one after it may still fit).
pub fn wanted_standby(
    candidates: &[String],
    overall_best: Option<&str>,
    keep: &[String],
    running: &str,
    kernel_default: &str,
    rss_kib: impl Fn(&str) -> Option<u64>,
    bounds: StandbyBounds,
) -> Vec<String> {
    let eligible = |e: &str| e != running && e != kernel_default;
    let mut order: Vec<&str> = Vec::new();
    for e in candidates.iter().map(String::as_str) {
        if eligible(e) && !order.contains(&e) {
            order.push(e);
        }
    }
    if let Some(best) = overall_best.filter(|b| eligible(b)) {
        if !order.contains(&best) {
            // The last slot within the bound goes to the overall best.
            let at = order.len().min(bounds.max.saturating_sub(1));
            order.insert(at, best);
        }
    }
    for e in keep.iter().map(String::as_str) {
        if eligible(e) && !order.contains(&e) {
            order.push(e);
        }
    }
    let mut out = Vec::new();
    let mut used = 0u64;
    for e in order {
        if out.len() == bounds.max {
            break;
        }
        let rss = rss_kib(e).unwrap_or(UNMEASURED_RSS_KIB);
        if used + rss > bounds.memory_kib {
            continue;
        }
        used += rss;
        out.push(e.to_owned());
    }
    out
}

/// The CPU a loading standby must have used during a sample (CPUs' worth: CPU seconds per
/// second) for the sample to be the agent's own work: 0.25. Loading on a quiet machine, a
/// standby takes a whole CPU (BPF verification) and the next ticks look like a load; beside a
/// real load, at its low priority, it gets a few percent (bpfland beside `xz -T0` on the lab's
/// 2 vCPUs: about 2 CPU seconds over 30 s, 0.07) and the sample is the load's.
pub const OWN_WORK_MIN_CPUS: f64 = 0.25;

/// The first of `standbys` that was loading at some time in the sample window
/// `(from_ms, to_ms]` (ms since the epoch): started before the window ended and, when parked,
/// parked after it began (a parked standby's loading is `since_unix_ms` plus `load_ms`; one
/// still loading counts to the end of the window). A standby's verification takes a CPU for
/// a second or more, and it starts when the vote turns (to stand by for the next class), so
/// the tick after a vote turns would otherwise describe the agent's own work.
pub fn loading_during(standbys: &[StandbyInfo], from_ms: u64, to_ms: u64) -> Option<&str> {
    standbys
        .iter()
        .find(|s| {
            let ended = match s.state {
                StandbyState::Loading => u64::MAX,
                StandbyState::Parked => s
                    .since_unix_ms
                    .saturating_add(s.load_ms.unwrap_or(0.0).max(0.0).ceil() as u64),
            };
            s.since_unix_ms < to_ms && ended > from_ms
        })
        .map(|s| s.expert.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(v: &[(&str, f64)]) -> BTreeMap<String, f64> {
        v.iter().map(|(c, s)| (c.to_string(), *s)).collect()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn mapping(class: &str) -> Option<&'static str> {
        match class {
            "game" => Some("lavd"),
            "build" => Some("rusty"),
            "web" => Some("bpfland"),
            "batch" => Some("rusty"),
            "idle" => Some("eevdf"),
            _ => None,
        }
    }

    const UNLIMITED: StandbyBounds = StandbyBounds {
        max: 10,
        memory_kib: u64::MAX / 2,
    };

    /// Beside a load the overall best is not started as insurance; with a CPU and a half
    /// idle, or nothing measured, it is; one already in the pool stays either way.
    #[test]
    fn the_default_budget_is_a_tenth_of_memory_but_never_below_256_mib() {
        let mib = 1024;
        assert_eq!(default_standby_memory_kib(None), 256 * mib);
        assert_eq!(default_standby_memory_kib(Some(2048 * mib)), 256 * mib);
        // The lab VM (3917 MiB): 391 MiB, room for scx_layered's 346 MiB.
        assert_eq!(default_standby_memory_kib(Some(3917 * mib)), 401_100);
        assert!(default_standby_memory_kib(Some(3917 * mib)) > 346 * mib);
        assert_eq!(
            default_standby_memory_kib(Some(32 * 1024 * mib)),
            3276 * mib + 819
        );
        assert!(
            mem_total_kib().is_some_and(|t| t > 0),
            "/proc/meminfo has MemTotal"
        );
    }

    #[test]
    fn the_insurance_standby_waits_for_idle_cpu_but_one_loading_keeps_its_slot() {
        assert_eq!(insurance_standby(Some("layered"), Some(0.1)), None);
        assert_eq!(
            insurance_standby(Some("layered"), Some(1.0)),
            None,
            "LLM inference's"
        );
        assert_eq!(
            insurance_standby(Some("layered"), Some(1.5)),
            Some("layered")
        );
        assert_eq!(insurance_standby(Some("layered"), None), Some("layered"));
        assert_eq!(insurance_standby(None, Some(2.0)), None);
        let busy = insurance_standby(Some("layered"), Some(0.0));
        let w = wanted_standby(&[], busy, &[], "cosmos", "eevdf", |_| None, UNLIMITED);
        assert!(
            w.is_empty(),
            "nothing to start while the load saturates: {w:?}"
        );
        let pool = names(&["layered"]);
        let w = wanted_standby(&[], busy, &pool, "cosmos", "eevdf", |_| None, UNLIMITED);
        assert_eq!(w, pool, "a standby already loading is not stopped");
    }

    #[test]
    fn candidates_follow_the_vote_scores_each_expert_once() {
        let s = scores(&[
            ("web", 0.5),
            ("game", 2.0),
            ("build", 1.0),
            ("batch", 0.9),
            ("unknown", 3.0),
            ("idle", 0.0),
        ]);
        assert_eq!(
            vote_candidates(&s, mapping),
            names(&["lavd", "rusty", "bpfland"])
        );
        // Equal scores: by class name, so the order does not depend on the map's.
        let tie = scores(&[("web", 1.0), ("build", 1.0)]);
        assert_eq!(vote_candidates(&tie, mapping), names(&["rusty", "bpfland"]));
        assert!(vote_candidates(&BTreeMap::new(), mapping).is_empty());
    }

    #[test]
    fn the_running_expert_and_eevdf_never_stand_by() {
        let c = names(&["eevdf", "lavd", "rusty", "lavd"]);
        let w = wanted_standby(&c, Some("eevdf"), &[], "lavd", "eevdf", |_| None, UNLIMITED);
        assert_eq!(w, names(&["rusty"]));
    }

    #[test]
    fn the_overall_best_takes_the_last_slot_within_the_bound() {
        let c = names(&["lavd", "rusty", "gru"]);
        let bounds = |max| StandbyBounds { max, ..UNLIMITED };
        let want = |max| {
            wanted_standby(
                &c,
                Some("bpfland"),
                &[],
                "eevdf",
                "eevdf",
                |_| None,
                bounds(max),
            )
        };
        assert_eq!(want(1), names(&["bpfland"]));
        assert_eq!(want(2), names(&["lavd", "bpfland"]));
        assert_eq!(want(3), names(&["lavd", "rusty", "bpfland"]));
        assert_eq!(want(5), names(&["lavd", "rusty", "gru", "bpfland"]));
        assert!(want(0).is_empty());
        // Already a candidate: not repeated, the vote's order kept.
        let w = wanted_standby(
            &c,
            Some("rusty"),
            &[],
            "eevdf",
            "eevdf",
            |_| None,
            bounds(2),
        );
        assert_eq!(w, names(&["lavd", "rusty"]));
        // No vote yet: the overall best alone.
        let w = wanted_standby(
            &[],
            Some("rusty"),
            &[],
            "bpfland",
            "eevdf",
            |_| None,
            bounds(2),
        );
        assert_eq!(w, names(&["rusty"]));
    }

    #[test]
    fn a_standby_no_longer_voted_for_keeps_a_slot_nothing_else_wants() {
        let bounds = StandbyBounds {
            max: 2,
            ..UNLIMITED
        };
        let pool = names(&["bpfland"]);
        // The vote moved on from bpfland's class: it stays beside the overall best.
        let w = wanted_standby(
            &[],
            Some("rusty"),
            &pool,
            "eevdf",
            "eevdf",
            |_| None,
            bounds,
        );
        assert_eq!(w, names(&["rusty", "bpfland"]));
        // A voted expert needs the slot: bpfland goes.
        let c = names(&["lavd"]);
        let w = wanted_standby(&c, Some("rusty"), &pool, "eevdf", "eevdf", |_| None, bounds);
        assert_eq!(w, names(&["lavd", "rusty"]));
        // Kept ones follow the same rules: never the running expert.
        let w = wanted_standby(&[], None, &pool, "bpfland", "eevdf", |_| None, bounds);
        assert!(w.is_empty());
    }

    #[test]
    fn the_memory_budget_skips_what_does_not_fit() {
        let c = names(&["lavd", "rusty", "bpfland"]);
        let rss = |e: &str| match e {
            "lavd" => Some(60_000),
            "rusty" => Some(50_000),
            _ => None,
        };
        let bounds = StandbyBounds {
            max: 3,
            memory_kib: 100_000,
        };
        // lavd fits; rusty would overflow; bpfland (unmeasured: 32 MiB assumed) fits after it.
        assert_eq!(
            wanted_standby(&c, None, &[], "eevdf", "eevdf", rss, bounds),
            names(&["lavd", "bpfland"])
        );
        let bounds = StandbyBounds {
            max: 3,
            memory_kib: 115_000,
        };
        assert_eq!(
            wanted_standby(&c, None, &[], "eevdf", "eevdf", rss, bounds),
            names(&["lavd", "rusty"])
        );
        // A budget too small for the first still admits a smaller one after it.
        let small = |e: &str| if e == "bpfland" { Some(10_000) } else { rss(e) };
        let bounds = StandbyBounds {
            max: 3,
            memory_kib: 40_000,
        };
        assert_eq!(
            wanted_standby(&c, None, &[], "eevdf", "eevdf", small, bounds),
            names(&["bpfland"])
        );
    }

    fn standby(expert: &str, since: u64, load_ms: Option<f64>) -> StandbyInfo {
        StandbyInfo {
            expert: expert.into(),
            pid: 1,
            since_unix_ms: since,
            state: if load_ms.is_some() {
                StandbyState::Parked
            } else {
                StandbyState::Loading
            },
            load_ms,
            rss_kib: None,
            bpf_kib: None,
        }
    }

    #[test]
    fn a_standby_loading_in_the_window_is_found_and_one_parked_before_it_is_not() {
        // Window (10 000, 11 000].
        let long_parked = standby("rusty", 1_000, Some(2_000.0));
        assert_eq!(
            loading_during(std::slice::from_ref(&long_parked), 10_000, 11_000),
            None
        );
        // Still loading, started in an earlier window.
        let loading = standby("bpfland", 9_500, None);
        assert_eq!(
            loading_during(&[long_parked, loading], 10_000, 11_000),
            Some("bpfland")
        );
        // Parked inside the window: its loading overlapped the window's start.
        let parked_in = standby("lavd", 8_000, Some(2_500.0));
        assert_eq!(loading_during(&[parked_in], 10_000, 11_000), Some("lavd"));
        // Started and parked within the window (real hardware: a fraction of a second).
        let quick = standby("cosmos", 10_200, Some(300.0));
        assert_eq!(loading_during(&[quick], 10_000, 11_000), Some("cosmos"));
        // Started after the window ended: the next window's.
        let later = standby("flash", 11_000, None);
        assert_eq!(loading_during(&[later], 10_000, 11_000), None);
        // Parked exactly when the window began: not in it.
        let edge = standby("lavd", 9_000, Some(1_000.0));
        assert_eq!(loading_during(&[edge], 10_000, 11_000), None);
        assert_eq!(loading_during(&[], 10_000, 11_000), None);
    }
}

//! The statistics of calibration: a cell's mean and spread, the noise floor, when two cells
//! differ, scores centred by scenario (an additive fit when experts ran unequally), and the
//! ranking of a class's experts by the noise rule with the stay expert first among ties.

use std::collections::BTreeMap;

use asa_scenarios::stats;

use super::{CellStats, NoiseEstimate, DEFAULT_NOISE_FLOOR};
use crate::{ClassMapping, MappingTable, RankedExpert, MAPPING_SCHEMA, MAPPING_VERSION};

/// Sample standard deviation (n − 1: the spread of repeated runs); 0 for fewer than two.
pub(super) fn sample_spread(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return 0.0;
    }
    stats::std_dev(xs).unwrap_or(0.0) * (n / (n - 1.0)).sqrt()
}

/// One expert's cell from its runs' scores (at least one): their mean, sample spread and count.
pub fn cell_stats(expert: &str, xs: &[f64]) -> CellStats {
    CellStats {
        expert: expert.to_owned(),
        mean: stats::mean(xs).expect("a cell holds at least one run"),
        spread: sample_spread(xs),
        runs: xs.len() as u32,
    }
}

/// The noise floor from the spreads of the cells measured twice or more: their median, or
/// [`DEFAULT_NOISE_FLOOR`] when there is none. `cells` names them for the source line.
pub fn noise_estimate(spreads: &[f64], cells: &str) -> NoiseEstimate {
    match stats::median(spreads) {
        Some(m) => NoiseEstimate {
            floor: m,
            source: format!(
                "median run-to-run spread of the {} {cells} with 2+ runs",
                spreads.len()
            ),
        },
        None => NoiseEstimate {
            floor: DEFAULT_NOISE_FLOOR,
            source: "default: no cell was measured twice, so no spread is known".into(),
        },
    }
}

/// What the difference of two cells' means must exceed to count: max(noise floor, 2 standard
/// errors of the difference), a cell measured once borrowing the floor as its spread.
pub fn difference_threshold(a: &CellStats, b: &CellStats, noise_floor: f64) -> f64 {
    let variance_of_mean = |c: &CellStats| {
        let s = if c.runs >= 2 { c.spread } else { noise_floor };
        s * s / f64::from(c.runs.max(1))
    };
    noise_floor.max(2.0 * (variance_of_mean(a) + variance_of_mean(b)).sqrt())
}

/// The noise floor of classes' runs (each class's scenarios as (expert, score) lists): the
/// median spread of the (class, expert) cells with 2+ runs, scores centred by scenario
/// ([`centred_by_scenario`]).
pub fn measured_noise<'a>(
    classes: impl IntoIterator<Item = &'a [Vec<(String, f64)>]>,
) -> NoiseEstimate {
    let spreads: Vec<f64> = classes
        .into_iter()
        .flat_map(|scenarios| centred_by_scenario(scenarios).into_values())
        .filter(|xs| xs.len() >= 2)
        .map(|xs| sample_spread(&xs))
        .collect();
    noise_estimate(&spreads, "(class, expert) cells")
}

/// Per expert, the run scores of a class's scenarios, each centred on its scenario's level and
/// shifted back by the mean of all runs. A class that pools several scenarios (`--classes
/// load`: one per probe, at very different score levels) then compares the experts within each
/// scenario: the spreads measure how consistently an expert does against the others, not how
/// different the probes are. A class of one scenario keeps its scores. A scenario's level is
/// its mean over every run when every expert ran it equally often; otherwise (a budgeted
/// calibration gives the experts it drops fewer runs) the level of the additive fit
/// [`additive_fit`], so that which experts ran a scenario does not move its level.
pub fn centred_by_scenario(scenarios: &[Vec<(String, f64)>]) -> BTreeMap<String, Vec<f64>> {
    let all: Vec<f64> = scenarios.iter().flatten().map(|(_, x)| *x).collect();
    let overall = stats::mean(&all).unwrap_or(0.0);
    let runs: Vec<(String, usize, f64)> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(i, runs)| runs.iter().map(move |(e, x)| (e.clone(), i, *x)))
        .collect();
    let fit = additive_fit(&runs);
    let mut cells: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (expert, i, x) in runs {
        cells
            .entry(expert)
            .or_default()
            .push(x - fit.levels[&i] + overall);
    }
    cells
}

/// Scores explained as an expert's effect plus a unit's level (a scenario, or a scenario's
/// repetition): [`additive_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct AdditiveFit {
    /// Each expert's effect: its mean score above the mean unit level.
    pub effects: BTreeMap<String, f64>,
    /// Each unit's level.
    pub levels: BTreeMap<usize, f64>,
}

impl AdditiveFit {
    /// Each expert's mean score with the units' levels taken out, on the scale of the scores
    /// (its effect plus the mean unit level): when every expert ran every unit, its plain mean.
    pub fn adjusted_means(&self) -> BTreeMap<String, f64> {
        let levels: Vec<f64> = self.levels.values().copied().collect();
        let base = stats::mean(&levels).unwrap_or(0.0);
        self.effects
            .iter()
            .map(|(e, effect)| (e.clone(), effect + base))
            .collect()
    }
}

/// Fits score = expert effect + unit level to runs `(expert, unit, score)` by alternating means
/// (least squares). Where every expert ran every unit once, a unit's level is its mean and an
/// expert's effect its mean minus the mean of all runs; where some ran fewer units, the fit
/// still compares the experts within units: a unit only the best experts ran does not look
/// better for it.
pub fn additive_fit(runs: &[(String, usize, f64)]) -> AdditiveFit {
    let mut by_unit: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for (_, u, x) in runs {
        by_unit.entry(*u).or_default().push(*x);
    }
    let mut levels: BTreeMap<usize, f64> = by_unit
        .iter()
        .map(|(u, xs)| (*u, stats::mean(xs).unwrap_or(0.0)))
        .collect();
    let mut effects: BTreeMap<String, f64> = BTreeMap::new();
    for _ in 0..10_000 {
        let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for (e, u, x) in runs {
            let s = sums.entry(e.as_str()).or_default();
            s.0 += x - levels[u];
            s.1 += 1.0;
        }
        effects = sums
            .into_iter()
            .map(|(e, (sum, n))| (e.to_string(), sum / n))
            .collect();
        let mut sums: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
        for (e, u, x) in runs {
            let s = sums.entry(*u).or_default();
            s.0 += x - effects[e];
            s.1 += 1.0;
        }
        let mut moved: f64 = 0.0;
        for (u, (sum, n)) in sums {
            let level = sum / n;
            moved = moved.max((level - levels[&u]).abs());
            levels.insert(u, level);
        }
        if moved < 1e-12 {
            break;
        }
    }
    AdditiveFit { effects, levels }
}

/// One class's experts ranked by the noise rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// Cells by mean score, best first.
    pub cells: Vec<CellStats>,
    /// The table's order: `cells`, or the stay expert moved first when the best one's gain
    /// over it is within the threshold.
    pub ordered: Vec<CellStats>,
    /// Best mean minus the stay expert's (None without a cell of it).
    pub gain: Option<f64>,
    /// max(noise floor, 2 standard errors of the difference best − stay); a cell measured
    /// once borrows the noise floor as its spread.
    pub threshold: f64,
    /// True when the stay expert was moved first.
    pub kept_stay: bool,
}

/// Ranks one class's experts: by mean score, except that `stay` stays first unless the best
/// expert beats it by more than the threshold.
pub fn rank(mut cells: Vec<CellStats>, stay: &str, noise_floor: f64) -> Ranking {
    cells.sort_by(|a, b| b.mean.total_cmp(&a.mean).then(a.expert.cmp(&b.expert)));
    let base = cells.iter().position(|c| c.expert == stay);
    let (gain, threshold) = match base {
        Some(b) => (
            Some(cells[0].mean - cells[b].mean),
            difference_threshold(&cells[0], &cells[b], noise_floor),
        ),
        None => (None, noise_floor),
    };
    let kept_stay = matches!((base, gain), (Some(b), Some(g)) if b != 0 && g <= threshold);
    let mut ordered = cells.clone();
    if let (true, Some(b)) = (kept_stay, base) {
        let moved = ordered.remove(b);
        ordered.insert(0, moved);
    }
    Ranking {
        cells,
        ordered,
        gain,
        threshold,
        kept_stay,
    }
}

/// A class's table rows from its cells, in the cells' order.
pub(super) fn ranked_rows(cells: &[CellStats]) -> Vec<RankedExpert> {
    cells
        .iter()
        .map(|c| RankedExpert {
            expert: c.expert.clone(),
            score: c.mean,
            spread: c.spread,
            runs: c.runs,
        })
        .collect()
}

/// The expert with the best mean over every class that compares two or more experts (among
/// those measured in all of them), each class's cells as `(class, cells)`: the table's default
/// expert, which the agent runs at start-up and when its vote is unsure, and so the expert a
/// class stays on unless another beats it by more than the noise. None without such an expert.
pub fn stay_expert<'a>(
    classes: impl IntoIterator<Item = (&'a str, &'a [CellStats])>,
) -> Option<String> {
    let provisional = MappingTable {
        schema: MAPPING_SCHEMA.to_string(),
        version: MAPPING_VERSION,
        source: "prototype".to_string(),
        created: String::new(),
        default_expert: None,
        machine: None,
        classes: classes
            .into_iter()
            .map(|(name, cells)| ClassMapping {
                name: name.to_string(),
                ranked: ranked_rows(cells),
                noise: 0.0,
                margin: None,
                settled: None,
                boots: None,
            })
            .collect(),
        switches: Vec::new(),
        layers: Vec::new(),
    };
    provisional.overall_best().map(|(expert, _)| expert)
}

//! Scores a result set and writes the report: per-scenario scores by expert, ranking, win rate
//! against EEVDF, Top-1/Top-3 against the static oracle, and SVG plots (a heatmap of
//! scenarios × experts relative to EEVDF, like the paper's Figure 5, and per-series sample
//! distributions).
//!
//! Comparison unit (paper 5.1.2): one run of one scenario. For repetition `r` of a scenario,
//! the experts' run scores are compared with each other: "win" = strictly higher score than
//! EEVDF's repetition `r`; "Top-k" = fewer than k experts strictly better. The static oracle of
//! a scenario is the expert with the best mean score over repetitions (chosen post hoc).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::catalogue::{Catalogue, IDLE};
use crate::runner::{ResultSet, ScenarioResult};
use crate::score::{fuse, SigmaOf, ValueSpec};

/// The score of one run and its parts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunScore {
    /// Expert.
    pub expert: String,
    /// Repetition.
    pub rep: u32,
    /// Fused user-experience score in [0, 1].
    pub score: f64,
    /// Each part's score (`value:<metric>`, `stability:<metric>`).
    pub parts: BTreeMap<String, f64>,
    /// What each part scored, by the same keys: the metric's value (its windowed tail where
    /// the catalogue asks for one) or σ.
    #[serde(default)]
    pub figures: BTreeMap<String, f64>,
    /// For comparison, not scored: for each part scored on a windowed tail, the whole run's
    /// percentile (the probe's summary value), and for each part scored on `ln_variance`, the
    /// samples' relative variance: the figures those parts scored before results version 2.
    #[serde(default)]
    pub plain: BTreeMap<String, f64>,
    /// Parts whose metric was not measured (scored 0).
    pub missing: Vec<String>,
}

/// Scores of every valid run of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioScores {
    /// Scenario name.
    pub scenario: String,
    /// Title.
    pub title: String,
    /// Probe profile.
    pub probe: String,
    /// Run scores.
    pub runs: Vec<RunScore>,
}

/// `table[scenario][expert]` = run scores indexed by repetition (None = no valid run).
pub type ScoreTable = BTreeMap<String, BTreeMap<String, Vec<Option<f64>>>>;

/// Reads one quantity from a run.
type Reader<'a> = Box<dyn Fn(&crate::runner::RunRecord) -> Option<f64> + 'a>;

/// One value-scored quantity of a run: its name in the parts, its spec, where to read it, and
/// where to read its plain figure (a windowed tail's whole-run percentile).
struct ValueItem<'a> {
    key: String,
    spec: &'a ValueSpec,
    read: Reader<'a>,
    plain: Option<Reader<'a>>,
}

/// Score every valid run of a scenario with the catalogue's parameters.
pub fn score_scenario(catalogue: &Catalogue, result: &ScenarioResult) -> Result<ScenarioScores> {
    let probe = catalogue.probes.get(&result.probe).with_context(|| {
        format!(
            "scenario {}: probe `{}` is not in the catalogue",
            result.scenario, result.probe
        )
    })?;
    let runs: Vec<_> = result.runs.iter().filter(|r| r.valid).collect();
    let mut items: Vec<ValueItem> = Vec::new();
    for m in &probe.metric {
        if let Some(spec) = &m.value {
            let name = m.name.clone();
            let summary: Reader = Box::new(move |r| r.probe.summary.get(&name).copied());
            let (read, plain) = match &m.tail {
                Some(tail) => {
                    let read: Reader = Box::new(move |r| {
                        r.probe
                            .samples
                            .get(&tail.samples)
                            .and_then(|xs| tail.of(xs))
                    });
                    (read, Some(summary))
                }
                None => (summary, None),
            };
            items.push(ValueItem {
                key: format!("value:{}", m.name),
                spec,
                read,
                plain,
            });
        }
    }
    // Loads: one part per phase with a load.
    let phase_loads: Vec<(usize, String)> = runs
        .first()
        .map(|r| {
            r.phases
                .iter()
                .map(|p| p.load.clone())
                .enumerate()
                .collect()
        })
        .unwrap_or_default();
    let phased = phase_loads.len() > 1;
    for (i, load) in phase_loads {
        if load == IDLE {
            continue;
        }
        let spec = &catalogue
            .loads
            .get(&load)
            .with_context(|| format!("load `{load}` is not in the catalogue"))?
            .score;
        let key = if phased {
            format!("value:phase{}:{load}", i + 1)
        } else {
            format!("value:load:{load}")
        };
        items.push(ValueItem {
            key,
            spec,
            read: Box::new(move |r| {
                r.phases
                    .get(i)
                    .and_then(|p| p.output.as_ref())
                    .and_then(|o| o.throughput)
            }),
            plain: None,
        });
    }

    let mut scores: Vec<RunScore> = runs
        .iter()
        .map(|r| RunScore {
            expert: r.expert.clone(),
            rep: r.rep,
            score: 0.0,
            parts: BTreeMap::new(),
            figures: BTreeMap::new(),
            plain: BTreeMap::new(),
            missing: Vec::new(),
        })
        .collect();
    let mut weighted: Vec<Vec<(f64, f64)>> = vec![Vec::new(); runs.len()];
    for item in &items {
        let values: Vec<Option<f64>> = runs.iter().map(|r| (item.read)(r)).collect();
        let population: Vec<f64> = values.iter().flatten().copied().collect();
        let curve = if population.is_empty() {
            None
        } else {
            Some(
                item.spec
                    .resolve(&population)
                    .with_context(|| format!("scenario {}: {}", result.scenario, item.key))?,
            )
        };
        for (i, v) in values.iter().enumerate() {
            if let Some(x) = v {
                scores[i].figures.insert(item.key.clone(), *x);
            }
            if let Some(x) = item.plain.as_ref().and_then(|read| read(runs[i])) {
                scores[i].plain.insert(item.key.clone(), x);
            }
            let s = match (v, &curve) {
                (Some(x), Some(c)) => c
                    .score(*x)
                    .with_context(|| format!("scenario {}: {}", result.scenario, item.key))?,
                _ => {
                    scores[i].missing.push(item.key.clone());
                    0.0
                }
            };
            scores[i].parts.insert(item.key.clone(), s);
            weighted[i].push((item.spec.weight, s));
        }
    }
    for m in &probe.metric {
        let Some(spec) = &m.stability else { continue };
        let key = format!("stability:{}", m.name);
        for (i, r) in runs.iter().enumerate() {
            let samples = r.probe.samples.get(&spec.samples);
            let sigma = samples.and_then(|s| spec.sigma.of(s));
            if let Some(sigma) = sigma {
                scores[i].figures.insert(key.clone(), sigma);
            }
            if spec.sigma == SigmaOf::LnVariance {
                if let Some(rel) = samples.and_then(|s| SigmaOf::RelativeVariance.of(s)) {
                    scores[i].plain.insert(key.clone(), rel);
                }
            }
            let s = match sigma {
                Some(sigma) => crate::score::stability_score(sigma, spec.k_s, spec.gamma_s)
                    .with_context(|| format!("scenario {}: {key}", result.scenario))?,
                None => {
                    scores[i].missing.push(key.clone());
                    0.0
                }
            };
            scores[i].parts.insert(key.clone(), s);
            weighted[i].push((spec.weight, s));
        }
    }
    for (i, parts) in weighted.iter().enumerate() {
        scores[i].score = fuse(parts).with_context(|| format!("scenario {}", result.scenario))?;
    }
    Ok(ScenarioScores {
        scenario: result.scenario.clone(),
        title: result.title.clone(),
        probe: result.probe.clone(),
        runs: scores,
    })
}

/// Arrange scenario scores as a [`ScoreTable`].
pub fn score_table(scored: &[ScenarioScores]) -> ScoreTable {
    let mut table = ScoreTable::new();
    for s in scored {
        let row = table.entry(s.scenario.clone()).or_default();
        for r in &s.runs {
            let reps = row.entry(r.expert.clone()).or_default();
            let idx = r.rep as usize;
            if reps.len() <= idx {
                reps.resize(idx + 1, None);
            }
            reps[idx] = Some(r.score);
        }
    }
    table
}

/// Mean over repetitions, per scenario and expert.
pub fn mean_scores(table: &ScoreTable) -> BTreeMap<String, BTreeMap<String, f64>> {
    table
        .iter()
        .map(|(scenario, row)| {
            let means = row
                .iter()
                .filter_map(|(e, reps)| {
                    let xs: Vec<f64> = reps.iter().flatten().copied().collect();
                    crate::stats::mean(&xs).map(|m| (e.clone(), m))
                })
                .collect();
            (scenario.clone(), means)
        })
        .collect()
}

/// Wins, ties and losses of one expert against a baseline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WinLoss {
    /// Comparisons with a strictly higher score.
    pub wins: u32,
    /// Comparisons with an equal score.
    pub ties: u32,
    /// Comparisons with a strictly lower score.
    pub losses: u32,
}

impl WinLoss {
    /// wins / comparisons (None without comparisons).
    pub fn rate(&self) -> Option<f64> {
        let n = self.wins + self.ties + self.losses;
        (n > 0).then(|| self.wins as f64 / n as f64)
    }
}

/// Compare `expert` with `baseline` run by run (same scenario, same repetition).
pub fn win_loss(table: &ScoreTable, expert: &str, baseline: &str) -> WinLoss {
    let mut wl = WinLoss::default();
    for row in table.values() {
        let (Some(a), Some(b)) = (row.get(expert), row.get(baseline)) else {
            continue;
        };
        for (x, y) in a.iter().zip(b) {
            if let (Some(x), Some(y)) = (x, y) {
                if x > y {
                    wl.wins += 1;
                } else if x < y {
                    wl.losses += 1;
                } else {
                    wl.ties += 1;
                }
            }
        }
    }
    wl
}

/// Share of runs (scenario × repetition) in which `expert` ranks among the top `k` experts
/// (rank = 1 + number of experts with a strictly higher score in the same repetition).
pub fn top_k_rate(table: &ScoreTable, expert: &str, k: usize) -> Option<f64> {
    let (mut hits, mut n) = (0usize, 0usize);
    for row in table.values() {
        let Some(mine) = row.get(expert) else {
            continue;
        };
        for (rep, x) in mine.iter().enumerate() {
            let Some(x) = x else { continue };
            let better = row
                .iter()
                .filter(|(e, _)| e.as_str() != expert)
                .filter_map(|(_, reps)| reps.get(rep).copied().flatten())
                .filter(|y| y > x)
                .count();
            n += 1;
            if better < k {
                hits += 1;
            }
        }
    }
    (n > 0).then(|| hits as f64 / n as f64)
}

/// The static oracle: per scenario, the expert with the best mean score, and that score.
pub fn static_oracle(table: &ScoreTable) -> BTreeMap<String, (String, f64)> {
    mean_scores(table)
        .into_iter()
        .filter_map(|(scenario, means)| {
            means
                .into_iter()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|best| (scenario, best))
        })
        .collect()
}

/// Mean score relative to the baseline's mean, per scenario and expert: `mean/baseline − 1`.
pub fn relative_to(table: &ScoreTable, baseline: &str) -> BTreeMap<String, BTreeMap<String, f64>> {
    mean_scores(table)
        .into_iter()
        .filter_map(|(scenario, means)| {
            let base = *means.get(baseline)?;
            (base > 0.0).then(|| {
                let rel = means
                    .iter()
                    .map(|(e, m)| (e.clone(), m / base - 1.0))
                    .collect();
                (scenario, rel)
            })
        })
        .collect()
}

/// One expert's line in the ranking.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpertSummary {
    /// Expert.
    pub expert: String,
    /// Mean of the per-scenario mean scores.
    pub mean_score: Option<f64>,
    /// Against EEVDF, run by run.
    pub vs_baseline: WinLoss,
    /// Mean relative improvement over EEVDF across scenarios.
    pub mean_gain_vs_baseline: Option<f64>,
    /// Top-1 rate.
    pub top1: Option<f64>,
    /// Top-3 rate.
    pub top3: Option<f64>,
    /// Mean of score / static-oracle score across scenarios.
    pub oracle_ratio: Option<f64>,
}

/// Everything the report shows, as data (also written as `report.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Baseline expert.
    pub baseline: String,
    /// Experts in the order of the run.
    pub experts: Vec<String>,
    /// Per-scenario, per-run scores.
    pub scenarios: Vec<ScenarioScores>,
    /// Mean score per scenario and expert.
    pub means: BTreeMap<String, BTreeMap<String, f64>>,
    /// Static oracle per scenario.
    pub oracle: BTreeMap<String, (String, f64)>,
    /// Ranking lines, best mean score first.
    pub ranking: Vec<ExpertSummary>,
    /// Scenarios that could not run, with the reason.
    pub errors: BTreeMap<String, String>,
}

/// Score a result set and aggregate it.
pub fn build_report(results: &ResultSet, baseline: &str) -> Result<Report> {
    let catalogue = Catalogue::parse(&results.catalogue_toml, "the results' scenario file")?;
    let mut scored = Vec::new();
    let mut errors = BTreeMap::new();
    for s in &results.scenarios {
        if let Some(e) = &s.error {
            errors.insert(s.scenario.clone(), e.clone());
        }
        if !s.runs.is_empty() {
            scored.push(score_scenario(&catalogue, s)?);
        }
    }
    let table = score_table(&scored);
    let means = mean_scores(&table);
    let oracle = static_oracle(&table);
    let rel = relative_to(&table, baseline);
    let mut ranking: Vec<ExpertSummary> = results
        .options
        .experts
        .iter()
        .map(|e| {
            let per_scenario: Vec<f64> = means.values().filter_map(|m| m.get(e).copied()).collect();
            let gains: Vec<f64> = rel.values().filter_map(|m| m.get(e).copied()).collect();
            let ratios: Vec<f64> = means
                .iter()
                .filter_map(|(s, m)| {
                    let (_, best) = oracle.get(s)?;
                    (*best > 0.0).then(|| m.get(e).map(|x| x / best)).flatten()
                })
                .collect();
            ExpertSummary {
                expert: e.clone(),
                mean_score: crate::stats::mean(&per_scenario),
                vs_baseline: win_loss(&table, e, baseline),
                mean_gain_vs_baseline: crate::stats::mean(&gains),
                top1: top_k_rate(&table, e, 1),
                top3: top_k_rate(&table, e, 3),
                oracle_ratio: crate::stats::mean(&ratios),
            }
        })
        .collect();
    ranking.sort_by(|a, b| {
        b.mean_score
            .unwrap_or(-1.0)
            .total_cmp(&a.mean_score.unwrap_or(-1.0))
    });
    Ok(Report {
        baseline: baseline.to_owned(),
        experts: results.options.experts.clone(),
        scenarios: scored,
        means,
        oracle,
        ranking,
        errors,
    })
}

fn pct(x: Option<f64>) -> String {
    x.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into())
}

/// The report as Markdown.
pub fn markdown(report: &Report, results: &ResultSet) -> String {
    let mut md = String::new();
    let m = &results.machine;
    let _ = writeln!(md, "# ASA scenario report\n");
    let _ = writeln!(
        md,
        "- machine: {} ({}, {} CPUs, kernel {})\n- started: {}\n- duration per run: {:.1} s (+{:.1} s settle; the scheduler held {:.0} s before the load), repetitions: {}\n- work unit: {:.0} iterations/ms\n- experts: {}\n",
        m.hostname,
        m.cpu_model,
        m.cpus,
        m.kernel,
        iso_utc(results.created_unix_ms),
        results.options.duration.as_secs_f64(),
        results.options.settle.as_secs_f64(),
        results.options.hold.as_secs_f64(),
        results.options.reps,
        results.options.work_unit.iterations_per_ms,
        report.experts.join(", ")
    );
    let _ = writeln!(
        md,
        "## Scores (mean over repetitions; **bold** = static oracle)\n"
    );
    let _ = write!(md, "| scenario | title |");
    for e in &report.experts {
        let _ = write!(md, " {e} |");
    }
    let _ = write!(md, "\n|---|---|");
    for _ in &report.experts {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    for s in &report.scenarios {
        let _ = write!(md, "| {} | {} |", s.scenario, s.title);
        let best = report.oracle.get(&s.scenario).map(|(e, _)| e.as_str());
        for e in &report.experts {
            let cell = report
                .means
                .get(&s.scenario)
                .and_then(|m| m.get(e))
                .copied();
            if best == Some(e.as_str()) {
                let _ = write!(md, " **{}** |", num(cell));
            } else {
                let _ = write!(md, " {} |", num(cell));
            }
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "\n## Ranking\n\n| expert | mean score | win/tie/loss vs {b} | win rate vs {b} | mean gain vs {b} | Top-1 | Top-3 | score / static oracle |\n|---|---:|---:|---:|---:|---:|---:|---:|",
        b = report.baseline
    );
    for r in &report.ranking {
        let _ = writeln!(
            md,
            "| {} | {} | {}/{}/{} | {} | {} | {} | {} | {} |",
            r.expert,
            num(r.mean_score),
            r.vs_baseline.wins,
            r.vs_baseline.ties,
            r.vs_baseline.losses,
            pct(r.vs_baseline.rate()),
            r.mean_gain_vs_baseline
                .map(|g| format!("{:+.2}%", g * 100.0))
                .unwrap_or("n/a".into()),
            pct(r.top1),
            pct(r.top3),
            pct(r.oracle_ratio)
        );
    }
    let _ = writeln!(md, "\n## Measurements (mean over valid repetitions)\n");
    let _ = writeln!(
        md,
        "| scenario | expert | probe metrics | background |\n|---|---|---|---|"
    );
    for s in &results.scenarios {
        for e in &report.experts {
            let runs: Vec<_> = s
                .runs
                .iter()
                .filter(|r| &r.expert == e && r.valid)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let mut keys: Vec<&String> = runs[0].probe.summary.keys().collect();
            keys.dedup();
            let probe = keys
                .iter()
                .map(|k| {
                    let xs: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r.probe.summary.get(*k).copied())
                        .collect();
                    format!(
                        "{k}={}",
                        crate::stats::mean(&xs)
                            .map(|v| format!("{v:.2}"))
                            .unwrap_or("n/a".into())
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let bg = runs[0]
                .phases
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let xs: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| {
                            r.phases
                                .get(i)
                                .and_then(|p| p.output.as_ref())
                                .and_then(|o| o.throughput)
                        })
                        .collect();
                    let unit = p.output.as_ref().map(|o| o.unit.as_str()).unwrap_or("");
                    match crate::stats::mean(&xs) {
                        Some(v) => format!("{} {v:.3} {unit}", p.load),
                        None => p.load.clone(),
                    }
                })
                .collect::<Vec<_>>()
                .join("; ");
            let _ = writeln!(md, "| {} | {e} | {probe} | {bg} |", s.scenario);
        }
    }
    let skipped: Vec<String> = results
        .scenarios
        .iter()
        .flat_map(|s| {
            s.skipped.iter().map(move |k| {
                format!(
                    "- {} {} rep {}: {}",
                    s.scenario,
                    k.expert,
                    k.rep + 1,
                    k.reason
                )
            })
        })
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(
            md,
            "\n## Runs skipped (expert could not be pinned)\n\n{}",
            skipped.join("\n")
        );
    }
    if !report.errors.is_empty() {
        let _ = writeln!(md, "\n## Scenarios that did not run\n");
        for (s, e) in &report.errors {
            let _ = writeln!(md, "- {s}: {e}");
        }
    }
    let _ = writeln!(
        md,
        "\n## Plots\n\n- `heatmap.svg`: score relative to {} per scenario and expert\n- `dist-<series>.svg`: raw-sample distributions per expert\n",
        report.baseline
    );
    md
}

/// `YYYY-MM-DD HH:MM:SS UTC` from milliseconds since the epoch (proleptic Gregorian).
pub fn iso_utc(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days to civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Colour for a relative change: red (−) through white (0) to green (+), saturating at ±`span`.
fn diverging(rel: f64, span: f64) -> String {
    let t = (rel / span).clamp(-1.0, 1.0);
    let (r, g, b) = if t >= 0.0 {
        (255.0 - 200.0 * t, 255.0 - 80.0 * t, 255.0 - 200.0 * t)
    } else {
        (255.0 + 35.0 * t, 255.0 + 200.0 * t, 255.0 + 200.0 * t)
    };
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

/// Heatmap of scenarios × experts, each cell the mean score relative to the baseline.
pub fn heatmap_svg(report: &Report) -> String {
    let rel: BTreeMap<&String, BTreeMap<String, f64>> = report
        .means
        .iter()
        .filter_map(|(s, m)| {
            let base = *m.get(&report.baseline)?;
            (base > 0.0).then(|| {
                (
                    s,
                    m.iter().map(|(e, v)| (e.clone(), v / base - 1.0)).collect(),
                )
            })
        })
        .collect();
    let (cw, ch, left, top) = (84.0, 22.0, 330.0, 60.0);
    let rows: Vec<&ScenarioScores> = report.scenarios.iter().collect();
    let width = left + cw * report.experts.len() as f64 + 20.0;
    let height = top + ch * rows.len() as f64 + 40.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"15\">User-experience score relative to {} (green = better, red = worse, saturates at ±20%)</text>\n",
        xml_escape(&report.baseline)
    );
    for (j, e) in report.experts.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            left + cw * (j as f64 + 0.5),
            top - 8.0,
            xml_escape(e)
        );
    }
    for (i, s) in rows.iter().enumerate() {
        let y = top + ch * i as f64;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} {}</text>",
            left - 8.0,
            y + ch * 0.7,
            xml_escape(&s.scenario),
            xml_escape(&s.title)
        );
        for (j, e) in report.experts.iter().enumerate() {
            let x = left + cw * j as f64;
            let v = rel.get(&s.scenario).and_then(|m| m.get(e)).copied();
            let (fill, label) = match v {
                Some(v) => (diverging(v, 0.2), format!("{:+.1}%", v * 100.0)),
                None => ("rgb(220,220,220)".to_owned(), "n/a".to_owned()),
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{cw}\" height=\"{ch}\" fill=\"{fill}\" stroke=\"white\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
                x + cw / 2.0,
                y + ch * 0.7
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Box plots (p5, p25, p50, p75, p95; dot at p99) of one raw-sample series per expert, pooled
/// over every valid run of every scenario that records it.
pub fn distribution_svg(results: &ResultSet, experts: &[String], series: &str) -> Option<String> {
    let mut pooled: Vec<(String, Vec<f64>)> = Vec::new();
    for e in experts {
        let xs: Vec<f64> = results
            .scenarios
            .iter()
            .flat_map(|s| s.runs.iter())
            .filter(|r| &r.expert == e && r.valid)
            .filter_map(|r| r.probe.samples.get(series))
            .flatten()
            .copied()
            .collect();
        if !xs.is_empty() {
            pooled.push((e.clone(), xs));
        }
    }
    if pooled.is_empty() {
        return None;
    }
    let q = |xs: &[f64], p: f64| crate::stats::percentile(xs, p).unwrap_or(0.0);
    let max = pooled
        .iter()
        .map(|(_, xs)| q(xs, 99.0))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.05;
    let (left, top, w, rh) = (110.0, 50.0, 560.0, 34.0);
    let height = top + rh * pooled.len() as f64 + 50.0;
    let sx = |v: f64| left + w * (v / max).clamp(0.0, 1.0);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"15\">{} — box p25–p75, line p50, whiskers p5–p95, dot p99 (all runs pooled)</text>\n",
        left + w + 40.0,
        xml_escape(series)
    );
    for (i, (e, xs)) in pooled.iter().enumerate() {
        let y = top + rh * i as f64;
        let mid = y + rh / 2.0;
        let (p5, p25, p50, p75, p95, p99) = (
            q(xs, 5.0),
            q(xs, 25.0),
            q(xs, 50.0),
            q(xs, 75.0),
            q(xs, 95.0),
            q(xs, 99.0),
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} (n={})</text>\
             <line x1=\"{:.1}\" y1=\"{mid:.1}\" x2=\"{:.1}\" y2=\"{mid:.1}\" stroke=\"black\"/>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"rgb(150,180,230)\" stroke=\"black\"/>\
             <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-width=\"2\"/>\
             <circle cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"3\" fill=\"rgb(200,40,40)\"/>",
            left - 8.0,
            mid + 4.0,
            xml_escape(e),
            xs.len(),
            sx(p5),
            sx(p95),
            sx(p25),
            y + 6.0,
            (sx(p75) - sx(p25)).max(1.0),
            rh - 12.0,
            sx(p50),
            y + 6.0,
            sx(p50),
            y + rh - 6.0,
            sx(p99)
        );
    }
    let axis_y = top + rh * pooled.len() as f64 + 10.0;
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{axis_y:.1}\" x2=\"{:.1}\" y2=\"{axis_y:.1}\" stroke=\"black\"/>",
        left + w
    );
    for t in 0..=5 {
        let v = max * t as f64 / 5.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.3}</text>",
            sx(v),
            axis_y + 16.0,
            v
        );
    }
    svg.push_str("</svg>\n");
    Some(svg)
}

/// Score `results` and write `report.md`, `report.json`, `heatmap.svg` and `dist-*.svg` to `dir`.
pub fn write_report(results: &ResultSet, baseline: &str, dir: &Path) -> Result<Report> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let report = build_report(results, baseline)?;
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    };
    write("report.md", &markdown(&report, results))?;
    write("report.json", &serde_json::to_string_pretty(&report)?)?;
    write("heatmap.svg", &heatmap_svg(&report))?;
    let mut series: Vec<String> = results
        .scenarios
        .iter()
        .flat_map(|s| s.runs.iter())
        .flat_map(|r| r.probe.samples.keys().cloned())
        .collect();
    series.sort();
    series.dedup();
    for s in series {
        if let Some(svg) = distribution_svg(results, &report.experts, &s) {
            write(&format!("dist-{s}.svg"), &svg)?;
        }
    }
    log::info!("report written to {}", dir.display());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two scenarios, three experts, two repetitions, hand-made.
    fn table() -> ScoreTable {
        let mut t = ScoreTable::new();
        let row = |v: &[(&str, &[f64])]| {
            v.iter()
                .map(|(e, xs)| (e.to_string(), xs.iter().map(|x| Some(*x)).collect()))
                .collect::<BTreeMap<_, _>>()
        };
        t.insert(
            "S1".into(),
            row(&[
                ("eevdf", &[0.5, 0.6]),
                ("lavd", &[0.7, 0.5]),
                ("rusty", &[0.4, 0.6]),
            ]),
        );
        t.insert(
            "S2".into(),
            row(&[
                ("eevdf", &[0.8, 0.8]),
                ("lavd", &[0.9, 0.95]),
                ("rusty", &[0.1, 0.2]),
            ]),
        );
        t
    }

    #[test]
    fn win_loss_counts_runs() {
        let t = table();
        // lavd vs eevdf: S1 rep0 win, rep1 loss; S2 both wins.
        assert_eq!(
            win_loss(&t, "lavd", "eevdf"),
            WinLoss {
                wins: 3,
                ties: 0,
                losses: 1
            }
        );
        assert_eq!(win_loss(&t, "lavd", "eevdf").rate(), Some(0.75));
        // rusty: S1 rep0 loss, rep1 tie; S2 losses.
        assert_eq!(
            win_loss(&t, "rusty", "eevdf"),
            WinLoss {
                wins: 0,
                ties: 1,
                losses: 3
            }
        );
        assert_eq!(win_loss(&t, "nobody", "eevdf").rate(), None);
    }

    #[test]
    fn top_k_ranks_within_each_repetition() {
        let t = table();
        // lavd ranks 1 in S1r0, 3 in S1r1 (eevdf 0.6, rusty 0.6 above), 1 and 1 in S2.
        assert_eq!(top_k_rate(&t, "lavd", 1), Some(0.75));
        assert_eq!(top_k_rate(&t, "lavd", 3), Some(1.0));
        // eevdf: S1r0 rank 2, S1r1 rank 1 (tie with rusty), S2 rank 2 twice.
        assert_eq!(top_k_rate(&t, "eevdf", 1), Some(0.25));
        assert_eq!(top_k_rate(&t, "eevdf", 2), Some(1.0));
        // rusty: S1r0 rank 3, S1r1 rank 1 (tie), S2 rank 3 twice.
        assert_eq!(top_k_rate(&t, "rusty", 1), Some(0.25));
    }

    #[test]
    fn oracle_and_relative_scores() {
        let t = table();
        let oracle = static_oracle(&t);
        // S1 means: eevdf 0.55, lavd 0.6, rusty 0.5 -> lavd; S2: lavd 0.925.
        assert_eq!(oracle["S1"].0, "lavd");
        assert!((oracle["S1"].1 - 0.6).abs() < 1e-12);
        assert_eq!(oracle["S2"].0, "lavd");
        let rel = relative_to(&t, "eevdf");
        assert!((rel["S1"]["lavd"] - (0.6 / 0.55 - 1.0)).abs() < 1e-12);
        assert_eq!(rel["S2"]["eevdf"], 0.0);
        assert!((rel["S2"]["rusty"] - (0.15 / 0.8 - 1.0)).abs() < 1e-12);
    }

    #[test]
    fn missing_runs_are_skipped_not_counted() {
        let mut t = table();
        t.get_mut("S2").unwrap().get_mut("lavd").unwrap()[1] = None;
        assert_eq!(
            win_loss(&t, "lavd", "eevdf"),
            WinLoss {
                wins: 2,
                ties: 0,
                losses: 1
            }
        );
        assert_eq!(top_k_rate(&t, "lavd", 1), Some(2.0 / 3.0));
        assert!((mean_scores(&t)["S2"]["lavd"] - 0.9).abs() < 1e-12);
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(iso_utc(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 12:34:56 UTC = 951827696 s
        assert_eq!(iso_utc(951_827_696_000), "2000-02-29 12:34:56 UTC");
        // 2026-11-22 00:00:00 UTC = 1795305600 s
        assert_eq!(iso_utc(1_795_305_600_999), "2026-11-22 00:00:00 UTC");
    }

    #[test]
    fn heatmap_colours_diverge_around_zero() {
        assert_eq!(diverging(0.0, 0.2), "rgb(255,255,255)");
        assert_eq!(diverging(0.5, 0.2), "rgb(55,175,55)");
        assert_eq!(diverging(-0.2, 0.2), "rgb(220,55,55)");
    }
}

#[cfg(test)]
mod scoring_tests {
    use super::*;
    use crate::loads::LoadOutput;
    use crate::probes::ProbeOutput;
    use crate::runner::{PhaseRecord, RunRecord};

    fn run(expert: &str, p99: f64, p50: f64, samples: Vec<f64>, gbit: f64) -> RunRecord {
        let mut probe = ProbeOutput {
            kind: "web".into(),
            ..Default::default()
        };
        probe.summary.insert("response_p99_ms".into(), p99);
        probe.summary.insert("response_p50_ms".into(), p50);
        probe.samples.insert("response_ms".into(), samples);
        RunRecord {
            expert: expert.into(),
            rep: 0,
            pinned: expert.into(),
            started_unix_ms: 0,
            probe_started_unix_ms: 0,
            probe_ended_unix_ms: 0,
            probe,
            phases: vec![PhaseRecord {
                load: "network".into(),
                planned_s: 1.0,
                output: Some(LoadOutput {
                    load: "network".into(),
                    throughput: Some(gbit),
                    unit: "Gbit/s".into(),
                    ..Default::default()
                }),
                started_unix_ms: 0,
                ended_unix_ms: 0,
                app_class: Some("network".into()),
            }],
            valid: true,
            load_start: None,
            probe_tgid: 0,
            probe_app_class: "interactive".into(),
            boot_id: None,
        }
    }

    #[test]
    fn scenario_score_fuses_the_catalogue_parts() {
        let cat = Catalogue::builtin().unwrap();
        let result = ScenarioResult {
            scenario: "S20".into(),
            title: "Web Browsing & Network Transfer".into(),
            probe: "web".into(),
            runs: vec![
                // At every threshold: value parts 0.5 (the p99 of the samples: 100 ms), σ = 0
                // -> stability 1, load at the median.
                run("eevdf", 100.0, 50.0, vec![100.0, 100.0], 3.0),
                run("lavd", 100.0, 50.0, vec![100.0, 100.0], 3.0),
            ],
            error: None,
            skipped: Vec::new(),
        };
        let scored = score_scenario(&cat, &result).unwrap();
        // (2·0.5 [p99] + 1·1 [stability] + 1·0.5 [p50] + 1·0.5 [load]) / 5 = 0.6
        for r in &scored.runs {
            assert!((r.score - 0.6).abs() < 1e-12, "{r:?}");
            assert!(r.missing.is_empty());
        }
        // Better latency and throughput score higher; a run without samples loses the parts
        // scored on them (its summary's p99 is not scored: the tail comes from the samples).
        let result = ScenarioResult {
            runs: vec![
                run("eevdf", 120.0, 60.0, vec![60.0, 120.0], 2.0),
                run("lavd", 80.0, 40.0, vec![30.0, 80.0], 4.0),
                run("rusty", 10.0, 40.0, vec![], 3.0),
            ],
            ..result
        };
        let scored = score_scenario(&cat, &result).unwrap();
        let (e, l, r) = (&scored.runs[0], &scored.runs[1], &scored.runs[2]);
        assert!(l.parts["value:response_p99_ms"] > e.parts["value:response_p99_ms"]);
        assert!(l.parts["value:load:network"] > 0.5 && e.parts["value:load:network"] < 0.5);
        assert_eq!(
            r.missing,
            ["value:response_p99_ms", "stability:response_p99_ms"]
        );
        assert_eq!(r.parts["stability:response_p99_ms"], 0.0);
        assert_eq!(r.parts["value:response_p99_ms"], 0.0);
    }

    /// A web run of 400 clicks at 40 ms with 6 clicks stalled to 900 ms in one window of six:
    /// the tail part scores the median of the window p99s and keeps the whole-run p99 (the
    /// summary's) beside it; the stability part scores the variance of ln latency and keeps the
    /// relative variance beside it.
    #[test]
    fn the_tail_part_scores_the_windowed_p99_and_keeps_the_whole_run_p99() {
        let cat = Catalogue::builtin().unwrap();
        let mut samples: Vec<f64> = (0..400).map(|i| 40.0 + (i % 4) as f64).collect();
        for x in &mut samples[10..16] {
            *x = 900.0;
        }
        let whole = crate::stats::percentile(&samples, 99.0).unwrap();
        let result = ScenarioResult {
            scenario: "S20".into(),
            title: "Web Browsing & Network Transfer".into(),
            probe: "web".into(),
            runs: vec![run("eevdf", whole, 41.0, samples.clone(), 3.0)],
            error: None,
            skipped: Vec::new(),
        };
        let scored = score_scenario(&cat, &result).unwrap();
        let r = &scored.runs[0];
        let tail = r.figures["value:response_p99_ms"];
        assert!(tail < 45.0, "{tail}");
        assert_eq!(r.plain["value:response_p99_ms"], whole);
        assert!(whole > 800.0, "{whole}");
        // 40 ms is below the 100 ms midpoint: the tail scores above one half.
        assert!(r.parts["value:response_p99_ms"] > 0.7, "{r:?}");
        let ln = crate::score::SigmaOf::LnVariance.of(&samples).unwrap();
        let rel = crate::score::SigmaOf::RelativeVariance
            .of(&samples)
            .unwrap();
        assert_eq!(r.figures["stability:response_p99_ms"], ln);
        assert_eq!(r.plain["stability:response_p99_ms"], rel);
        assert!(ln < rel, "{ln} {rel}");
        // Parts without another estimator have a figure and no plain one.
        assert_eq!(r.figures["value:response_p50_ms"], 41.0);
        assert!(!r.plain.contains_key("value:response_p50_ms"));
        assert_eq!(r.figures["value:load:network"], 3.0);
    }
}

//! The user-experience score of the ASA paper, section 4.2.
//!
//! Two parts, both in (0, 1], higher is better:
//!
//! * **Stability score** `S_stability = 1 / (1 + k_s · σ^γ_s)`. The paper calls σ "the data
//!   variance". We take σ as the population variance of the metric's raw samples in one run
//!   (for example every frame time of a game run, in ms, so σ is in ms²). Because a variance in
//!   ms² is not comparable across metrics, a metric may instead ask for the squared coefficient
//!   of variation (variance / mean², unit-free): [`SigmaOf::RelativeVariance`], or for the
//!   variance of the samples' natural logarithm (unit-free too): [`SigmaOf::LnVariance`]. For
//!   small spreads the two agree (var ln x ≈ var x / mean²), but a handful of stalls 100× the
//!   median blows the relative variance up by orders of magnitude and moves the variance of
//!   ln x by a little (see [`SigmaOf::LnVariance`]). Choice documented here and in the README:
//!   the default is the paper's plain variance; the catalogue's latency metrics use ln variance.
//! * **Value score** `S_value(x) = 1 / (1 + e^(±k_v · ((x − θ) / f)^γ_v))`, a sigmoid around the
//!   threshold θ. The sign is `−` when higher values are better (so `S → 1` as `x → ∞`) and `+`
//!   when lower values are better. The paper leaves `u^γ_v` undefined for a negative base
//!   `u = (x − θ)/f` with a fractional exponent (it would be NaN). We use the odd extension
//!   `sign(u) · |u|^γ_v`, which keeps the curve monotone and point-symmetric around θ
//!   (`S(θ + d) = 1 − S(θ − d)`), exactly the shape of the paper's Figure 4.
//!   θ is "the metric's median or a critical performance point": either a fixed number or the
//!   median of x over all runs of the scenario being compared ([`Threshold::Median`]).
//!   f is "selected via standard deviation or threshold": a fixed number, the standard deviation
//!   of x over the compared runs ([`Scale::StdDev`]), or |θ| ([`Scale::Theta`]).
//! * **Fusion**: the scenario score is the weighted mean `Σ w_i S_i / Σ w_i` over every value
//!   and stability part of every metric of the scenario (weights from the scenario file).
//! * **Windowed tail** (our addition): a value part may score, instead of the probe's whole-run
//!   percentile, the median over equal windows of the run's samples (in time order) of each
//!   window's percentile ([`windowed_percentile`], asked for by a metric's [`TailSpec`]). A
//!   whole-run p99 of a 60 s office run is set by its 4 worst of 388 keystrokes, so one stall
//!   decides it: in the live evaluation of 2026-11-28 the p99 of the same expert's two
//!   repetitions differed by up to 4.44 ln units, the median of six window p99s by at most 0.75
//!   (results/2026-11-29-yardstick-stalls). A stall in one or two windows of six leaves the
//!   windowed tail at a typical window's p99; a problem that recurs in most windows sets it.
//!
//! Every function checks its inputs and returns an error instead of a silent NaN.

use serde::{Deserialize, Serialize};

/// What went wrong while scoring.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreError {
    /// An input was NaN or infinite.
    #[error("{what} must be a finite number, got {value}")]
    NotFinite {
        /// Which input.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// An input was outside its allowed range.
    #[error("{what} must be {rule}, got {value}")]
    OutOfRange {
        /// Which input.
        what: &'static str,
        /// The rule it broke.
        rule: &'static str,
        /// Its value.
        value: f64,
    },
    /// Nothing to fuse, or every weight was zero.
    #[error("weighted fusion needs at least one part with a positive weight")]
    NoWeight,
    /// θ or f depend on the population of runs, and it was empty.
    #[error("θ = median or f = std need at least one value of the metric across runs")]
    EmptyPopulation,
}

fn finite(what: &'static str, value: f64) -> Result<f64, ScoreError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(ScoreError::NotFinite { what, value })
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Larger is better (fps, throughput): the paper's `−` sign.
    Higher,
    /// Smaller is better (latency, underruns): the paper's `+` sign.
    Lower,
}

impl Direction {
    /// The sign in front of `k_v` in the exponent.
    pub fn exponent_sign(self) -> f64 {
        match self {
            Direction::Higher => -1.0,
            Direction::Lower => 1.0,
        }
    }
}

/// `sign(u) · |u|^γ`: the odd extension of `u^γ` to negative `u` (see the module docs).
pub fn signed_pow(u: f64, gamma: f64) -> f64 {
    if u == 0.0 {
        0.0
    } else {
        u.signum() * u.abs().powf(gamma)
    }
}

/// `S_stability = 1 / (1 + k_s · σ^γ_s)`. Needs σ ≥ 0, k_s ≥ 0, γ_s > 0 (all finite).
/// σ = 0 gives 1 (perfectly stable); σ → ∞ gives 0.
pub fn stability_score(sigma: f64, k_s: f64, gamma_s: f64) -> Result<f64, ScoreError> {
    let sigma = finite("σ (variance)", sigma)?;
    let k_s = finite("k_s", k_s)?;
    let gamma_s = finite("γ_s", gamma_s)?;
    if sigma < 0.0 {
        return Err(ScoreError::OutOfRange {
            what: "σ (variance)",
            rule: ">= 0",
            value: sigma,
        });
    }
    if k_s < 0.0 {
        return Err(ScoreError::OutOfRange {
            what: "k_s",
            rule: ">= 0",
            value: k_s,
        });
    }
    if gamma_s <= 0.0 {
        return Err(ScoreError::OutOfRange {
            what: "γ_s",
            rule: "> 0",
            value: gamma_s,
        });
    }
    // k_s·σ^γ_s may overflow to +inf for a huge σ: 1/(1+inf) = 0, a defined result.
    Ok(1.0 / (1.0 + k_s * sigma.powf(gamma_s)))
}

/// A value-score curve with θ and f already resolved to numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ValueCurve {
    /// Which way the metric improves.
    pub direction: Direction,
    /// Threshold θ: the score is exactly 0.5 at `x = θ`.
    pub theta: f64,
    /// Scale f (> 0) that makes `(x − θ)/f` unit-free.
    pub scale: f64,
    /// Steepness k_v (> 0).
    pub k_v: f64,
    /// Exponent γ_v (> 0): > 1 widens the flat "sweet spot" around θ, < 1 narrows it.
    pub gamma_v: f64,
}

impl ValueCurve {
    /// Check the parameters.
    pub fn validate(&self) -> Result<(), ScoreError> {
        finite("θ", self.theta)?;
        for (what, v) in [("f", self.scale), ("k_v", self.k_v), ("γ_v", self.gamma_v)] {
            if finite(what, v)? <= 0.0 {
                return Err(ScoreError::OutOfRange {
                    what,
                    rule: "> 0",
                    value: v,
                });
            }
        }
        Ok(())
    }

    /// `S_value(x) = 1 / (1 + e^(±k_v · ((x − θ)/f)^γ_v))`.
    pub fn score(&self, x: f64) -> Result<f64, ScoreError> {
        self.validate()?;
        let x = finite("x (metric value)", x)?;
        let u = (x - self.theta) / self.scale;
        let exponent = self.direction.exponent_sign() * self.k_v * signed_pow(u, self.gamma_v);
        // exp overflows to +inf for large exponents: 1/(1+inf) = 0; exp(-inf) = 0 gives 1.
        Ok(1.0 / (1.0 + exponent.exp()))
    }
}

/// θ as written in a scenario file: a number, or `"median"` of the metric over the compared runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NumberOrWord", into = "NumberOrWord")]
pub enum Threshold {
    /// A fixed critical point, in the metric's unit.
    Fixed(f64),
    /// The median of the metric over every run of the same scenario in the result set.
    Median,
}

/// f as written in a scenario file: a number, `"std"` or `"theta"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "NumberOrWord", into = "NumberOrWord")]
pub enum Scale {
    /// A fixed scale, in the metric's unit.
    Fixed(f64),
    /// The standard deviation of the metric over the compared runs (falls back to |θ| when it
    /// is 0, e.g. with a single run).
    StdDev,
    /// |θ|: the deviation is measured relative to the threshold.
    Theta,
}

/// Serde helper: a TOML number or a word.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NumberOrWord {
    /// A number.
    Number(f64),
    /// A word.
    Word(String),
}

impl TryFrom<NumberOrWord> for Threshold {
    type Error = String;
    fn try_from(v: NumberOrWord) -> Result<Self, String> {
        match v {
            NumberOrWord::Number(n) if n.is_finite() => Ok(Self::Fixed(n)),
            NumberOrWord::Word(w) if w == "median" => Ok(Self::Median),
            other => Err(format!(
                "theta must be a finite number or \"median\", got {other:?}"
            )),
        }
    }
}

impl From<Threshold> for NumberOrWord {
    fn from(t: Threshold) -> Self {
        match t {
            Threshold::Fixed(n) => Self::Number(n),
            Threshold::Median => Self::Word("median".into()),
        }
    }
}

impl TryFrom<NumberOrWord> for Scale {
    type Error = String;
    fn try_from(v: NumberOrWord) -> Result<Self, String> {
        match v {
            NumberOrWord::Number(n) if n.is_finite() && n > 0.0 => Ok(Self::Fixed(n)),
            NumberOrWord::Word(w) if w == "std" => Ok(Self::StdDev),
            NumberOrWord::Word(w) if w == "theta" => Ok(Self::Theta),
            other => Err(format!(
                "scale must be a number > 0, \"std\" or \"theta\", got {other:?}"
            )),
        }
    }
}

impl From<Scale> for NumberOrWord {
    fn from(s: Scale) -> Self {
        match s {
            Scale::Fixed(n) => Self::Number(n),
            Scale::StdDev => Self::Word("std".into()),
            Scale::Theta => Self::Word("theta".into()),
        }
    }
}

/// How σ is computed from a run's raw samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SigmaOf {
    /// Population variance in the samples' unit squared (the paper's definition).
    #[default]
    Variance,
    /// Variance / mean², unit-free (squared coefficient of variation).
    RelativeVariance,
    /// Population variance of `ln x`, unit-free: a latency series' spread as factors, so a
    /// few stalls 100× the median weigh as factors of 100, not as their squared milliseconds.
    /// In the live evaluation of 2026-11-28, 3–6 stalled keystrokes of 388 made S10's relative
    /// variance, and with it the stability part, the second largest share of a 0.368 score gap;
    /// samples ≤ 0 count as [`LN_FLOOR`].
    LnVariance,
}

/// The smallest sample [`SigmaOf::LnVariance`] takes the logarithm of (in the samples' unit:
/// 1 µs for the catalogue's millisecond series), so a zero latency stays finite.
pub const LN_FLOOR: f64 = 1e-3;

impl SigmaOf {
    /// σ of these samples; `None` when there are none (or the mean is 0 for relative variance).
    pub fn of(self, samples: &[f64]) -> Option<f64> {
        match self {
            SigmaOf::Variance => crate::stats::variance(samples),
            SigmaOf::RelativeVariance => {
                let var = crate::stats::variance(samples)?;
                let m = crate::stats::mean(samples)?;
                (m != 0.0).then(|| var / (m * m))
            }
            SigmaOf::LnVariance => {
                let ln: Vec<f64> = samples.iter().map(|x| x.max(LN_FLOOR).ln()).collect();
                crate::stats::variance(&ln)
            }
        }
    }
}

/// A window of [`windowed_percentile`] keeps at least this many samples (while there is more
/// than one window): a p99 of 50 samples still interpolates between the two largest.
pub const TAIL_WINDOW_SAMPLES: usize = 50;

/// At most this many windows in [`windowed_percentile`]: 10 s windows of a 60 s run.
pub const TAIL_WINDOWS: usize = 6;

/// How many windows [`windowed_percentile`] splits `n` samples into:
/// `clamp(n / TAIL_WINDOW_SAMPLES, 1, TAIL_WINDOWS)`.
pub fn tail_windows(n: usize) -> usize {
    (n / TAIL_WINDOW_SAMPLES).clamp(1, TAIL_WINDOWS)
}

/// The windowed tail of a series: `samples` (in time order) cut into [`tail_windows`] windows
/// of equal sample counts, in order, and the median of each window's `p`-th percentile
/// ([`crate::stats::percentile`]). One window (fewer than 100 samples) gives the plain
/// percentile. `None` for no samples.
pub fn windowed_percentile(samples: &[f64], p: f64) -> Option<f64> {
    let n = samples.len();
    let k = tail_windows(n);
    let per_window: Vec<f64> = (0..k)
        .filter_map(|i| crate::stats::percentile(&samples[i * n / k..(i + 1) * n / k], p))
        .collect();
    crate::stats::median(&per_window)
}

/// Asks a metric's value part for the windowed tail of a sample series
/// ([`windowed_percentile`]) instead of the probe's whole-run summary value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailSpec {
    /// The raw-sample series (e.g. `input_latency_ms` for `input_latency_p99_ms`).
    pub samples: String,
    /// The percentile of each window, in (0, 100].
    pub percentile: f64,
}

impl TailSpec {
    /// The windowed tail of `samples`.
    pub fn of(&self, samples: &[f64]) -> Option<f64> {
        windowed_percentile(samples, self.percentile)
    }
}

/// Value-score parameters of one metric, as written in a scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueSpec {
    /// Which way the metric improves.
    pub direction: Direction,
    /// θ.
    pub theta: Threshold,
    /// f.
    pub scale: Scale,
    /// k_v.
    pub k_v: f64,
    /// γ_v.
    pub gamma_v: f64,
    /// Weight of this value score in the scenario's fusion.
    pub weight: f64,
}

impl ValueSpec {
    /// Resolve θ and f against the metric's values over the compared runs.
    pub fn resolve(&self, population: &[f64]) -> Result<ValueCurve, ScoreError> {
        let theta = match self.theta {
            Threshold::Fixed(t) => t,
            Threshold::Median => {
                crate::stats::median(population).ok_or(ScoreError::EmptyPopulation)?
            }
        };
        let scale = match self.scale {
            Scale::Fixed(f) => f,
            Scale::Theta => theta.abs(),
            Scale::StdDev => {
                let sd = crate::stats::std_dev(population).ok_or(ScoreError::EmptyPopulation)?;
                if sd > 0.0 {
                    sd
                } else {
                    theta.abs()
                }
            }
        };
        // θ = 0 with f = θ would divide by zero: fall back to 1 unit, documented in the README.
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let curve = ValueCurve {
            direction: self.direction,
            theta,
            scale,
            k_v: self.k_v,
            gamma_v: self.gamma_v,
        };
        curve.validate()?;
        Ok(curve)
    }
}

/// Stability-score parameters of one metric, as written in a scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StabilitySpec {
    /// Name of the raw-sample series σ is computed from (e.g. `frame_time_ms`).
    pub samples: String,
    /// How σ is computed.
    #[serde(default)]
    pub sigma: SigmaOf,
    /// k_s.
    pub k_s: f64,
    /// γ_s.
    pub gamma_s: f64,
    /// Weight of this stability score in the scenario's fusion.
    pub weight: f64,
}

/// `Σ w_i S_i / Σ w_i`. Weights must be finite and ≥ 0 with a positive sum; scores in [0, 1].
pub fn fuse(parts: &[(f64, f64)]) -> Result<f64, ScoreError> {
    let mut num = 0.0;
    let mut den = 0.0;
    for &(w, s) in parts {
        let w = finite("weight", w)?;
        let s = finite("score", s)?;
        if w < 0.0 {
            return Err(ScoreError::OutOfRange {
                what: "weight",
                rule: ">= 0",
                value: w,
            });
        }
        if !(0.0..=1.0).contains(&s) {
            return Err(ScoreError::OutOfRange {
                what: "score",
                rule: "in [0, 1]",
                value: s,
            });
        }
        num += w * s;
        den += w;
    }
    if den <= 0.0 {
        return Err(ScoreError::NoWeight);
    }
    Ok(num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    fn curve(direction: Direction, theta: f64, scale: f64, k_v: f64, gamma_v: f64) -> ValueCurve {
        ValueCurve {
            direction,
            theta,
            scale,
            k_v,
            gamma_v,
        }
    }

    #[test]
    fn stability_hand_computed() {
        // 1 / (1 + 1 * 1^1) = 0.5
        close(stability_score(1.0, 1.0, 1.0).unwrap(), 0.5);
        // 1 / (1 + 2 * 0.5^2) = 1 / 1.5
        close(stability_score(0.5, 2.0, 2.0).unwrap(), 2.0 / 3.0);
        // 1 / (1 + 0.1 * 100^0.5) = 1 / 2
        close(stability_score(100.0, 0.1, 0.5).unwrap(), 0.5);
    }

    #[test]
    fn stability_edges() {
        // σ = 0: perfectly stable.
        close(stability_score(0.0, 5.0, 1.5).unwrap(), 1.0);
        // Huge σ: tends to 0 without NaN, even when k·σ^γ overflows.
        let s = stability_score(1e300, 1.0, 2.0).unwrap();
        assert_eq!(s, 0.0);
        assert!(stability_score(-1.0, 1.0, 1.0).is_err());
        assert!(stability_score(f64::NAN, 1.0, 1.0).is_err());
        assert!(stability_score(1.0, 1.0, 0.0).is_err());
        assert!(stability_score(1.0, -1.0, 1.0).is_err());
    }

    #[test]
    fn value_hand_computed() {
        // u = (70 - 60) / 10 = 1; higher is better: 1 / (1 + e^-1)
        let higher = curve(Direction::Higher, 60.0, 10.0, 1.0, 1.0);
        close(higher.score(70.0).unwrap(), 0.731_058_578_630_004_9);
        // lower is better: 1 / (1 + e^1)
        let lower = curve(Direction::Lower, 60.0, 10.0, 1.0, 1.0);
        close(lower.score(70.0).unwrap(), 0.268_941_421_369_995_1);
        // u = 2, k = 0.5, γ = 2: exponent = -0.5 * 4 = -2 -> 1 / (1 + e^-2)
        let c = curve(Direction::Higher, 10.0, 5.0, 0.5, 2.0);
        close(c.score(20.0).unwrap(), 1.0 / (1.0 + (-2.0f64).exp()));
    }

    #[test]
    fn value_edges() {
        // x = θ gives exactly one half in both directions.
        for d in [Direction::Higher, Direction::Lower] {
            close(curve(d, 16.7, 4.0, 3.0, 1.7).score(16.7).unwrap(), 0.5);
        }
        // Huge x saturates without NaN.
        let higher = curve(Direction::Higher, 60.0, 10.0, 1.0, 1.0);
        assert_eq!(higher.score(1e308).unwrap(), 1.0);
        assert_eq!(higher.score(-1e308).unwrap(), 0.0);
        let lower = curve(Direction::Lower, 60.0, 10.0, 1.0, 1.0);
        assert_eq!(lower.score(1e308).unwrap(), 0.0);
        // Negative base with a fractional exponent: odd extension, no NaN, symmetric around θ.
        let frac = curve(Direction::Higher, 10.0, 2.0, 1.0, 0.5);
        let below = frac.score(8.0).unwrap(); // u = -1 -> -1^0.5 = -1 -> 1 / (1 + e^1)
        close(below, 0.268_941_421_369_995_1);
        close(below + frac.score(12.0).unwrap(), 1.0);
        let s = frac.score(7.0).unwrap();
        assert!(s.is_finite() && s < below);
        // Bad inputs are errors, not NaN.
        assert!(higher.score(f64::NAN).is_err());
        assert!(curve(Direction::Higher, 1.0, 0.0, 1.0, 1.0)
            .score(1.0)
            .is_err());
        assert!(curve(Direction::Higher, 1.0, 1.0, 1.0, -1.0)
            .score(1.0)
            .is_err());
    }

    #[test]
    fn monotone_in_the_preferred_direction() {
        let c = curve(Direction::Lower, 16.7, 8.0, 2.0, 1.5);
        let xs = [0.0, 5.0, 16.0, 17.0, 30.0, 100.0];
        for w in xs.windows(2) {
            assert!(c.score(w[0]).unwrap() > c.score(w[1]).unwrap());
        }
    }

    #[test]
    fn resolve_median_and_std() {
        let spec = ValueSpec {
            direction: Direction::Higher,
            theta: Threshold::Median,
            scale: Scale::StdDev,
            k_v: 1.0,
            gamma_v: 1.0,
            weight: 1.0,
        };
        let c = spec.resolve(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        close(c.theta, 2.5);
        close(c.scale, 1.25f64.sqrt());
        // One run: std = 0 -> falls back to |θ|.
        let one = spec.resolve(&[8.0]).unwrap();
        close(one.scale, 8.0);
        assert_eq!(spec.resolve(&[]), Err(ScoreError::EmptyPopulation));
        let theta_scale = ValueSpec {
            scale: Scale::Theta,
            theta: Threshold::Fixed(-4.0),
            ..spec
        };
        close(theta_scale.resolve(&[]).unwrap().scale, 4.0);
    }

    #[test]
    fn sigma_variants() {
        close(SigmaOf::Variance.of(&[1.0, 3.0]).unwrap(), 1.0);
        close(SigmaOf::RelativeVariance.of(&[1.0, 3.0]).unwrap(), 0.25);
        // ln 1 = 0, ln e² = 2: variance 1.
        close(
            SigmaOf::LnVariance
                .of(&[1.0, std::f64::consts::E.powi(2)])
                .unwrap(),
            1.0,
        );
        assert_eq!(SigmaOf::Variance.of(&[]), None);
        assert_eq!(SigmaOf::LnVariance.of(&[]), None);
        assert_eq!(SigmaOf::RelativeVariance.of(&[0.0, 0.0]), None);
        // A zero sample counts as LN_FLOOR: finite.
        assert!(SigmaOf::LnVariance.of(&[0.0, 5.0]).unwrap().is_finite());
    }

    /// 388 keystrokes of 4–6 ms, 4 of them stalled to 1 s: the relative variance grows from
    /// 0.02 to over 1 (about 40), the variance of ln latency stays below 0.5; both are
    /// scale-free.
    #[test]
    fn ln_variance_damps_a_few_stalls_and_ignores_the_unit() {
        let calm: Vec<f64> = (0..388).map(|i| 4.0 + (i % 5) as f64 * 0.5).collect();
        let mut stalled = calm.clone();
        for x in &mut stalled[100..104] {
            *x = 1000.0;
        }
        let rel = |xs: &[f64]| SigmaOf::RelativeVariance.of(xs).unwrap();
        let ln = |xs: &[f64]| SigmaOf::LnVariance.of(xs).unwrap();
        assert!(rel(&stalled) > 1.0, "{}", rel(&stalled));
        assert!(ln(&stalled) < 0.5, "{}", ln(&stalled));
        let ms_to_s: Vec<f64> = stalled.iter().map(|x| x / 1000.0).collect();
        close(ln(&ms_to_s), ln(&stalled));
        // Small spreads: the two agree.
        assert!((rel(&calm) - ln(&calm)).abs() < 0.1 * rel(&calm));
    }

    #[test]
    fn tail_windows_keep_fifty_samples_each_up_to_six() {
        assert_eq!(tail_windows(0), 1);
        assert_eq!(tail_windows(99), 1);
        assert_eq!(tail_windows(100), 2);
        assert_eq!(tail_windows(388), 6);
        assert_eq!(tail_windows(12_000), 6);
    }

    /// 388 keystrokes (S10's count) in six windows of 64–65: one window's stall of 5 keys
    /// would set the whole-run p99, not the windowed one.
    #[test]
    fn one_stall_window_does_not_set_the_tail() {
        let mut xs: Vec<f64> = (0..388).map(|i| 3.0 + (i % 10) as f64 * 0.1).collect();
        for x in &mut xs[20..25] {
            *x = 1500.0;
        }
        let whole = crate::stats::percentile(&xs, 99.0).unwrap();
        let windowed = windowed_percentile(&xs, 99.0).unwrap();
        assert!(whole > 1000.0, "{whole}");
        assert!(windowed < 4.0, "{windowed}");
        // Two bad windows of six still leave the median of the window p99s at a calm one's.
        for x in &mut xs[200..205] {
            *x = 1500.0;
        }
        assert!(windowed_percentile(&xs, 99.0).unwrap() < 4.0);
    }

    #[test]
    fn a_recurring_stall_still_sets_the_tail() {
        let mut xs: Vec<f64> = (0..388).map(|i| 3.0 + (i % 10) as f64 * 0.1).collect();
        // A stall in four windows of six.
        for start in [10, 80, 150, 280] {
            for x in &mut xs[start..start + 3] {
                *x = 800.0;
            }
        }
        assert!(windowed_percentile(&xs, 99.0).unwrap() > 500.0);
    }

    #[test]
    fn few_samples_keep_the_plain_percentile() {
        let xs: Vec<f64> = (1..=30).map(f64::from).collect();
        assert_eq!(
            windowed_percentile(&xs, 99.0),
            crate::stats::percentile(&xs, 99.0)
        );
        assert_eq!(windowed_percentile(&[], 99.0), None);
        // The windows follow the samples' order: a late stall counts in the last window only.
        let mut late: Vec<f64> = vec![1.0; 600];
        late[599] = 9.0;
        assert_eq!(windowed_percentile(&late, 100.0), Some(1.0));
        let tail = TailSpec {
            samples: "x".into(),
            percentile: 100.0,
        };
        assert_eq!(tail.of(&late), Some(1.0));
    }

    #[test]
    fn fusion_is_a_weighted_mean() {
        // (2 * 0.5 + 1 * 1.0) / 3
        close(fuse(&[(2.0, 0.5), (1.0, 1.0)]).unwrap(), 2.0 / 3.0);
        close(fuse(&[(0.0, 0.1), (1.0, 0.9)]).unwrap(), 0.9);
        assert_eq!(fuse(&[]), Err(ScoreError::NoWeight));
        assert_eq!(fuse(&[(0.0, 0.3)]), Err(ScoreError::NoWeight));
        assert!(fuse(&[(-1.0, 0.3)]).is_err());
        assert!(fuse(&[(1.0, f64::NAN)]).is_err());
    }
}

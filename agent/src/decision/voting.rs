//! Time-weighted probability voting: Algorithm 1 of the ASA paper (§3.3), as a streaming window.
//!
//! For the last `W` ticks (t = 1 oldest … W newest) and every class c:
//! `A_c = Σ_t p'_{t,c} · α^(W−t)`, with `p'_{t,c} = p_{t,c}` if `p_{t,c} > θ`, else 0;
//! the voted class is `argmax_c A_c`.
//!
//! Streaming details (the paper states the batch form only):
//! - the newest tick always has t = W (weight α^0 = 1), a tick k ticks old has weight α^k; while
//!   fewer than W ticks have been pushed the window is simply shorter (the missing old ticks
//!   count 0);
//! - **no decision** ([`Vote::class`] is `None`) when every `A_c` is 0: an empty window, or no
//!   probability above θ anywhere in it;
//! - ties between the highest scores go to the lowest class index (deterministic; a tie has
//!   margin 0, so the policy never switches on one);
//! - besides the vote, where the window *leans* ([`Vote::leaning`]): the class with the largest
//!   `Σ_t p_{t,c} · α^(W−t)` with θ not applied, so that a window of ticks that each fall short
//!   of θ still says which class its evidence favours (the policy keeps the running expert on
//!   it, never moves on it).

use std::collections::VecDeque;

/// Default window: 6 ticks (6 s at the default 1 Hz tick), as the issue and the paper's setup.
pub const DEFAULT_WINDOW: usize = 6;
/// Default threshold θ = 0.5: a tick votes only for a class the classifier gives a majority of
/// its probability mass, so each tick votes for at most one class (the probabilities sum to 1),
/// and ambiguous ticks abstain instead of adding noise.
pub const DEFAULT_THRESHOLD: f64 = 0.5;
/// Default decay α = 0.8: weights 1, 0.8, 0.64, 0.51, 0.41, 0.33 from newest to oldest over 6
/// ticks (sum 3.69). One spike tick (weight ≤ 1) never outweighs five consistent older ticks
/// (≥ 2.69 at equal confidence), and a genuine change wins after 3 ticks (2.44 vs 1.25 at equal
/// confidence) instead of 4 for an unweighted majority.
pub const DEFAULT_DECAY: f64 = 0.8;

/// The parameters of Algorithm 1.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VotingConfig {
    /// W: number of ticks in the window (≥ 1).
    pub window: usize,
    /// θ: probabilities not strictly above it count 0.
    pub threshold: f64,
    /// α: decay per tick of age, in (0, 1].
    pub decay: f64,
}

impl Default for VotingConfig {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
            threshold: DEFAULT_THRESHOLD,
            decay: DEFAULT_DECAY,
        }
    }
}

impl VotingConfig {
    /// Checks the ranges.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.window >= 1, "voting window must be at least 1 tick");
        anyhow::ensure!(
            (0.0..1.0).contains(&self.threshold),
            "voting threshold θ must be in [0, 1), got {}",
            self.threshold
        );
        anyhow::ensure!(
            self.decay > 0.0 && self.decay <= 1.0,
            "voting decay α must be in (0, 1], got {}",
            self.decay
        );
        Ok(())
    }

    /// The largest score one class can reach: Σ_{k<W} α^k (probability 1 on every tick).
    pub fn max_score(&self) -> f64 {
        (0..self.window).map(|k| self.decay.powi(k as i32)).sum()
    }
}

/// The outcome of one vote.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Vote {
    /// The voted class index, `None` when no class scored (see the module doc).
    pub class: Option<usize>,
    /// A_c for every class.
    pub scores: Vec<f64>,
    /// (A_best − A_second) / Σ_c A_c, in [0, 1]; 0 without a decision.
    pub margin: f64,
    /// A_best / max possible score ([`VotingConfig::max_score`]), in [0, 1]: how much of a full,
    /// unanimous, certain window backs the vote.
    pub support: f64,
    /// Ticks in the window.
    pub ticks: usize,
    /// The class with the largest time-weighted probability when θ is not applied (ties to the
    /// lowest index), `None` for an empty window: where the evidence leans even when no tick is
    /// sure enough to vote. Equal to `class` whenever a tick's probability dominates; never a
    /// reason to switch.
    pub leaning: Option<usize>,
}

/// Algorithm 1 over a sliding window, fed one probability vector per tick.
#[derive(Debug, Clone)]
pub struct TimeWeightedVoter {
    config: VotingConfig,
    classes: usize,
    /// Oldest first; at most `window` entries.
    window: VecDeque<Vec<f32>>,
}

impl TimeWeightedVoter {
    /// A voter for `classes` classes.
    pub fn new(config: VotingConfig, classes: usize) -> anyhow::Result<Self> {
        config.check()?;
        anyhow::ensure!(classes >= 1, "voting needs at least one class");
        Ok(Self {
            config,
            classes,
            window: VecDeque::with_capacity(config.window),
        })
    }

    /// The parameters.
    pub fn config(&self) -> &VotingConfig {
        &self.config
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Forgets every tick (e.g. after the model changed).
    pub fn clear(&mut self) {
        self.window.clear();
    }

    /// Adds one tick's probabilities (one per class; NaN counts as 0) and votes.
    pub fn push(&mut self, probabilities: &[f32]) -> anyhow::Result<Vote> {
        anyhow::ensure!(
            probabilities.len() == self.classes,
            "{} probabilities for {} classes",
            probabilities.len(),
            self.classes
        );
        if self.window.len() == self.config.window {
            // Reuse the oldest buffer instead of allocating.
            let mut oldest = self.window.pop_front().expect("window is full");
            oldest.copy_from_slice(probabilities);
            self.window.push_back(oldest);
        } else {
            self.window.push_back(probabilities.to_vec());
        }
        Ok(self.vote())
    }

    /// Votes over the current window without adding a tick.
    pub fn vote(&self) -> Vote {
        self.vote_over(self.classes, |class| class)
    }

    /// Algorithm 1 over groups of classes instead of classes: each tick's probabilities are
    /// summed within a group before θ applies, and the [`Vote`]'s indices (class, scores,
    /// leaning) are group indices. `group_of[c]` is class c's group (`group_of.len()` must be the
    /// number of classes; groups are `0..=max`). Two look-alike classes that share a group (the
    /// policy groups the classes its table sends to the same expert) at p 0.45 each vote for
    /// their group at 0.9, where neither would pass θ alone.
    pub fn vote_grouped(&self, group_of: &[usize]) -> anyhow::Result<Vote> {
        anyhow::ensure!(
            group_of.len() == self.classes,
            "{} groups given for {} classes",
            group_of.len(),
            self.classes
        );
        let groups = group_of.iter().max().map_or(0, |g| g + 1);
        Ok(self.vote_over(groups, |class| group_of[class]))
    }

    /// Σ_t p_{t,c} · α^(W−t) for every class, θ not applied (what [`Vote::leaning`] is the
    /// largest of).
    pub fn weighted_probabilities(&self) -> Vec<f64> {
        let mut sums = vec![0.0f64; self.classes];
        let mut weight = 1.0f64;
        for tick in self.window.iter().rev() {
            for (sum, &p) in sums.iter_mut().zip(tick.iter()) {
                if p > 0.0 {
                    *sum += f64::from(p) * weight;
                }
            }
            weight *= self.config.decay;
        }
        sums
    }

    /// The vote over `outcomes` outcomes, class c's probability counting for `outcome_of(c)`.
    fn vote_over(&self, outcomes: usize, outcome_of: impl Fn(usize) -> usize) -> Vote {
        let mut scores = vec![0.0f64; outcomes];
        let mut unthresholded = vec![0.0f64; outcomes];
        let mut tick_sums = vec![0.0f64; outcomes];
        let mut weight = 1.0f64;
        // Newest first: weight α^0, α^1, …
        for tick in self.window.iter().rev() {
            tick_sums.iter_mut().for_each(|p| *p = 0.0);
            for (class, &p) in tick.iter().enumerate() {
                if p > 0.0 {
                    tick_sums[outcome_of(class)] += f64::from(p);
                }
            }
            for ((score, raw), &p) in scores
                .iter_mut()
                .zip(unthresholded.iter_mut())
                .zip(tick_sums.iter())
            {
                if p > self.config.threshold {
                    *score += p * weight;
                }
                *raw += p * weight;
            }
            weight *= self.config.decay;
        }
        let best = highest(&scores);
        let leaning = highest(&unthresholded);
        let total: f64 = scores.iter().sum();
        let (margin, support) = match best {
            Some(b) => {
                let second = scores
                    .iter()
                    .enumerate()
                    .filter(|(c, _)| *c != b)
                    .map(|(_, s)| *s)
                    .fold(0.0f64, f64::max);
                (
                    (scores[b] - second) / total,
                    scores[b] / self.config.max_score(),
                )
            }
            None => (0.0, 0.0),
        };
        Vote {
            class: best,
            scores,
            margin,
            support,
            ticks: self.window.len(),
            leaning,
        }
    }
}

/// The index of the largest positive value (ties to the lowest index), None when none is > 0.
fn highest(values: &[f64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in values.iter().enumerate() {
        if v > 0.0 && best.is_none_or(|b| v > values[b]) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPS: f64 = 1e-9;

    fn voter(window: usize, threshold: f64, decay: f64, classes: usize) -> TimeWeightedVoter {
        TimeWeightedVoter::new(
            VotingConfig {
                window,
                threshold,
                decay,
            },
            classes,
        )
        .unwrap()
    }

    fn assert_close(actual: &[f64], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len());
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() < 1e-6, "{actual:?} != {expected:?}");
        }
    }

    #[test]
    fn empty_window_gives_no_decision() {
        let v = voter(6, 0.5, 0.8, 3);
        let vote = v.vote();
        assert_eq!(vote.class, None);
        assert_eq!(vote.scores, vec![0.0; 3]);
        assert_eq!((vote.margin, vote.support, vote.ticks), (0.0, 0.0, 0));
    }

    #[test]
    fn all_probabilities_at_or_below_threshold_give_no_decision() {
        let mut v = voter(3, 0.5, 0.8, 3);
        // 0.5 is not strictly above θ = 0.5: it counts 0 too.
        for p in [[0.4f32, 0.3, 0.3], [0.5, 0.5, 0.0], [0.2, 0.45, 0.35]] {
            let vote = v.push(&p).unwrap();
            assert_eq!(vote.class, None);
            assert_eq!(vote.scores, vec![0.0; 3]);
        }
    }

    /// Ticks that each fall short of θ vote for nothing but still lean: [0.4, 0.3, 0.3] then
    /// [0.2, 0.45, 0.35] (newest weight 1, older 0.8): A = [0.52, 0.69, 0.59] → class 1.
    #[test]
    fn a_window_below_the_threshold_still_leans_to_a_class() {
        let mut v = voter(3, 0.5, 0.8, 3);
        assert_eq!(v.vote().leaning, None, "an empty window leans nowhere");
        assert_eq!(v.push(&[0.4, 0.3, 0.3]).unwrap().leaning, Some(0));
        let vote = v.push(&[0.2, 0.45, 0.35]).unwrap();
        assert_eq!((vote.class, vote.leaning), (None, Some(1)));
        // A confident tick: the vote and the leaning agree.
        let vote = v.push(&[0.05, 0.9, 0.05]).unwrap();
        assert_eq!((vote.class, vote.leaning), (Some(1), Some(1)));
        // Missing probabilities (NaN) lean nowhere.
        let mut w = voter(3, 0.5, 0.8, 2);
        assert_eq!(w.push(&[f32::NAN, f32::NAN]).unwrap().leaning, None);
    }

    /// W = 3, θ = 0.3, α = 0.5, pushes (oldest first):
    /// t1 = [0.6, 0.4, 0.0], t2 = [0.2, 0.7, 0.1], t3 = [0.35, 0.25, 0.4].
    /// After t3 the weights are t1: 0.25, t2: 0.5, t3: 1.
    /// A0 = 0.6·0.25 + 0 (0.2 ≤ θ) + 0.35·1 = 0.5
    /// A1 = 0.4·0.25 + 0.7·0.5 + 0 (0.25 ≤ θ) = 0.45
    /// A2 = 0 + 0 + 0.4·1 = 0.4
    /// → class 0, margin (0.5 − 0.45) / 1.35 = 0.037037, support 0.5 / 1.75 = 0.285714.
    #[test]
    fn hand_computed_scores_with_threshold_and_decay() {
        let mut v = voter(3, 0.3, 0.5, 3);
        let vote = v.push(&[0.6, 0.4, 0.0]).unwrap();
        // One tick: A = [0.6, 0.4, 0], weights 1.
        assert_close(&vote.scores, &[0.6, 0.4, 0.0]);
        assert_eq!(vote.class, Some(0));
        v.push(&[0.2, 0.7, 0.1]).unwrap();
        let vote = v.push(&[0.35, 0.25, 0.4]).unwrap();
        assert_close(&vote.scores, &[0.5, 0.45, 0.4]);
        assert_eq!(vote.class, Some(0));
        assert!((vote.margin - 0.05 / 1.35).abs() < 1e-6);
        assert!((vote.support - 0.5 / 1.75).abs() < 1e-6);
        assert_eq!(vote.ticks, 3);
        // A fourth tick drops t1: weights t2: 0.25, t3: 0.5, t4: 1, t4 = [0, 0.9, 0.1]:
        // A0 = 0.35·0.5 = 0.175, A1 = 0.7·0.25 + 0.9 = 1.075, A2 = 0.4·0.5 = 0.2.
        let vote = v.push(&[0.0, 0.9, 0.1]).unwrap();
        assert_close(&vote.scores, &[0.175, 1.075, 0.2]);
        assert_eq!(vote.class, Some(1));
    }

    /// Defaults W = 6, θ = 0.5, α = 0.8. Six ticks of class 0 at p = 0.9, then one tick of class
    /// 1 at p = 0.9: A1 = 0.9·1 = 0.9, A0 = 0.9·(0.8 + 0.64 + 0.512 + 0.4096 + 0.32768) = 2.420352.
    /// Class 0 keeps the vote; when the spike has aged out of the window A1 is 0 again.
    #[test]
    fn one_tick_spike_does_not_flip_the_vote() {
        let mut v = TimeWeightedVoter::new(VotingConfig::default(), 2).unwrap();
        for _ in 0..6 {
            assert_eq!(v.push(&[0.9, 0.1]).unwrap().class, Some(0));
        }
        let vote = v.push(&[0.1, 0.9]).unwrap();
        assert_close(&vote.scores, &[2.420352, 0.9]);
        assert_eq!(vote.class, Some(0));
        // The spike at every later position of the window: class 0 keeps the vote.
        for _ in 0..5 {
            assert_eq!(v.push(&[0.9, 0.1]).unwrap().class, Some(0));
        }
        let vote = v.push(&[0.9, 0.1]).unwrap();
        assert_eq!(vote.scores[1], 0.0);
    }

    /// Defaults. Six ticks of class 0 at p = 0.9, then class 1 at p = 0.9 from tick n = 1 on:
    /// A1 = 0.9·Σ_{k<n} 0.8^k, A0 = 0.9·Σ_{n≤k<6} 0.8^k.
    /// n = 1: A1 = 0.9,   A0 = 2.420352 → class 0
    /// n = 2: A1 = 1.62,  A0 = 1.700352 → class 0
    /// n = 3: A1 = 2.196, A0 = 1.124352 → class 1: the vote flips on the 3rd tick of the change.
    #[test]
    fn genuine_change_flips_on_the_third_tick() {
        let mut v = TimeWeightedVoter::new(VotingConfig::default(), 2).unwrap();
        for _ in 0..6 {
            v.push(&[0.9, 0.1]).unwrap();
        }
        let first = v.push(&[0.1, 0.9]).unwrap();
        assert_eq!(first.class, Some(0));
        let second = v.push(&[0.1, 0.9]).unwrap();
        assert_close(&second.scores, &[1.700352, 1.62]);
        assert_eq!(second.class, Some(0));
        let third = v.push(&[0.1, 0.9]).unwrap();
        assert_close(&third.scores, &[1.124352, 2.196]);
        assert_eq!(third.class, Some(1));
        // margin (2.196 − 1.124352) / 3.320352, support 2.196 / 3.68928
        assert!((third.margin - 1.071648 / 3.320352).abs() < 1e-6);
        assert!((third.support - 2.196 / 3.68928).abs() < 1e-6);
    }

    /// Defaults; classes 0 and 1 look alike (one group), class 2 is another group. Three ticks
    /// of [0.45, 0.45, 0.1]: no class passes θ, so the class vote is None; the group vote sums
    /// 0.9 a tick: A = [0.9 · (1 + 0.8 + 0.64), 0] = [2.196, 0] → group 0, support 0.595.
    #[test]
    fn a_grouped_vote_sums_look_alike_classes_before_the_threshold() {
        let mut v = TimeWeightedVoter::new(VotingConfig::default(), 3).unwrap();
        for _ in 0..3 {
            let vote = v.push(&[0.45, 0.45, 0.1]).unwrap();
            assert_eq!(vote.class, None);
        }
        let grouped = v.vote_grouped(&[0, 0, 1]).unwrap();
        assert_close(&grouped.scores, &[2.196, 0.0]);
        assert_eq!((grouped.class, grouped.leaning), (Some(0), Some(0)));
        assert!((grouped.margin - 1.0).abs() < EPS);
        assert!((grouped.support - 2.196 / 3.68928).abs() < 1e-6);
        // Every class its own group: the plain vote.
        assert_eq!(v.vote_grouped(&[0, 1, 2]).unwrap(), v.vote());
        // The unthresholded sums the leaning is taken from.
        assert_close(&v.weighted_probabilities(), &[1.098, 1.098, 0.244]);
        assert!(v.vote_grouped(&[0, 0]).is_err());
    }

    #[test]
    fn ties_go_to_the_lowest_class_with_zero_margin() {
        let mut v = voter(2, 0.0, 1.0, 3);
        let vote = v.push(&[0.0, 0.5, 0.5]).unwrap();
        assert_eq!(vote.class, Some(1));
        assert!(vote.margin.abs() < EPS);
    }

    #[test]
    fn nan_counts_zero_and_wrong_length_is_an_error() {
        let mut v = voter(2, 0.1, 1.0, 2);
        let vote = v.push(&[f32::NAN, 0.6]).unwrap();
        assert_eq!(vote.class, Some(1));
        assert_eq!(vote.scores[0], 0.0);
        assert!(v.push(&[0.5]).is_err());
    }

    #[test]
    fn bad_config_is_refused() {
        for (w, t, a) in [
            (0, 0.5, 0.8),
            (6, 1.0, 0.8),
            (6, -0.1, 0.8),
            (6, 0.5, 0.0),
            (6, 0.5, 1.5),
        ] {
            assert!(TimeWeightedVoter::new(
                VotingConfig {
                    window: w,
                    threshold: t,
                    decay: a
                },
                2
            )
            .is_err());
        }
        assert!(TimeWeightedVoter::new(VotingConfig::default(), 0).is_err());
    }

    #[test]
    fn max_score_of_defaults() {
        assert!((VotingConfig::default().max_score() - 3.68928).abs() < 1e-9);
    }
}

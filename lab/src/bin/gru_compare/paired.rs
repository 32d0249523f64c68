//! Confidence intervals for throughput ratios paired within rounds.
//!
//! Each round gives one ratio r = scheduler / EEVDF. Ratios multiply, so the interval is taken on
//! ln r: mean ± t(0.975, n − 1) · sd / √n, mapped back with exp. That is the 95 % interval of the
//! geometric mean under the usual assumption that ln r is roughly normal across rounds; with a
//! handful of rounds Student's t (not 1.96) keeps it honest.

/// Two-sided 95 % quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 97.5 % quantile of Student's t with `df` degrees of freedom (normal beyond 30: the
/// interval is then at most 4 % too narrow).
fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        _ => 1.960,
    }
}

/// The geometric mean of positive `ratios` and its 95 % confidence interval (low, high).
/// `None` without two ratios (no spread to estimate) or with a ratio that is not positive.
pub fn geometric_ci(ratios: &[f64]) -> Option<(f64, f64, f64)> {
    let n = ratios.len();
    if n < 2
        || ratios
            .iter()
            .any(|r| r.is_nan() || *r <= 0.0 || r.is_infinite())
    {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_975(n - 1) * (var / n as f64).sqrt();
    Some((mean.exp(), (mean - half).exp(), (mean + half).exp()))
}

/// What an interval says about a target of at least `floor` × EEVDF (issue 7: 0.97, within 3 %
/// of EEVDF's throughput; being faster is fine): met when the whole interval is at or above the
/// floor, missed when it is all below, open while it straddles the floor.
pub fn verdict(low: f64, high: f64, floor: f64) -> &'static str {
    if low >= floor {
        "met"
    } else if high < floor {
        "missed"
    } else {
        "open"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_of_known_log_ratios() {
        // ln r = ±0.1 around 0: mean 0, sd 0.1155 (n - 1 = 2), half width 4.303 * sd / sqrt 3.
        let r = [(-0.1f64).exp(), 1.0, 0.1f64.exp()];
        let (geo, low, high) = geometric_ci(&r).unwrap();
        assert!((geo - 1.0).abs() < 1e-12, "{geo}");
        let half = 4.303 * 0.1 / 3f64.sqrt();
        assert!((low - (-half).exp()).abs() < 1e-9, "{low}");
        assert!((high - half.exp()).abs() < 1e-9, "{high}");
    }

    #[test]
    fn more_rounds_narrow_the_interval() {
        let few = geometric_ci(&[0.9, 1.1, 0.95, 1.05]).unwrap();
        let many = geometric_ci(&[0.9, 1.1, 0.95, 1.05].repeat(4)).unwrap();
        assert!(many.2 - many.1 < (few.2 - few.1) / 2.0, "{few:?} {many:?}");
        assert!(many.1 < many.0 && many.0 < many.2);
    }

    #[test]
    fn no_interval_without_spread_to_estimate_or_with_bad_ratios() {
        assert_eq!(geometric_ci(&[]), None);
        assert_eq!(geometric_ci(&[1.0]), None);
        assert_eq!(geometric_ci(&[1.0, 0.0]), None);
        assert_eq!(geometric_ci(&[1.0, f64::NAN]), None);
        assert_eq!(t_975(0), f64::INFINITY);
        assert_eq!(t_975(31), 1.960);
    }

    #[test]
    fn verdicts_against_the_floor() {
        assert_eq!(verdict(0.98, 1.05, 0.97), "met");
        assert_eq!(verdict(0.97, 1.05, 0.97), "met");
        assert_eq!(verdict(0.90, 0.96, 0.97), "missed");
        assert_eq!(verdict(0.90, 1.01, 0.97), "open");
    }
}

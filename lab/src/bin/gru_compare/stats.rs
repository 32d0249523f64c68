//! Small statistics the other modules share (a leaf: it imports none of them).

/// The median, the mean of the middle two for an even count; None without values.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The mean in µs of `count` waits (or slices) that took `total_ns` together; None without
/// any.
pub fn mean_us(count: u64, total_ns: u64) -> Option<f64> {
    (count > 0).then(|| total_ns as f64 / count as f64 / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_no_values() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn means_in_microseconds() {
        assert_eq!(mean_us(4, 10_000), Some(2.5));
        assert_eq!(mean_us(0, 10_000), None);
    }
}

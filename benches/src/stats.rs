//! Medians and size labels.

/// The median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// A byte count as `2^k` bytes when it is a power of two, else in MiB.
pub fn size_label(bytes: usize) -> String {
    if bytes.is_power_of_two() {
        format!("2^{} B ({} MiB)", bytes.trailing_zeros(), bytes >> 20)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// GB/s (10^9 bytes per second) for `bytes` in `ms`.
pub fn gbps(bytes: usize, ms: f64) -> f64 {
    if ms <= 0.0 {
        return 0.0;
    }
    bytes as f64 / (ms * 1e-3) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }

    #[test]
    fn labels_and_rates() {
        assert_eq!(size_label(1 << 30), "2^30 B (1024 MiB)");
        assert!((gbps(1_000_000_000, 1000.0) - 1.0).abs() < 1e-12);
    }
}

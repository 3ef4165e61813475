//! Percentiles of one phase's samples, in milliseconds.

use std::time::Duration;

/// One answered request.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When it was sent, from the phase's start.
    pub sent: Duration,
    /// Until the answer's last byte.
    pub total: Duration,
    /// Until the answer's first body byte.
    pub first_byte: Duration,
}

/// Summary of one phase (direct or through a gateway).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Requests answered in full.
    pub requests: usize,
    /// Requests that failed (status, transport, incomplete answer).
    pub errors: usize,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub ttfb_p50_ms: Option<f64>,
    pub ttfb_p99_ms: Option<f64>,
    /// Answered requests per second over the measured span.
    pub rps: Option<f64>,
}

/// The value at quantile `q` of sorted `values` (nearest rank, as the latency bench).
fn at(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted.get(i.min(sorted.len() - 1)).copied()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Summary {
    /// Summarises `samples`, with `errors` failures besides.
    pub fn of(samples: &[Sample], errors: usize, first_error: Option<String>) -> Summary {
        let mut total: Vec<f64> = samples.iter().map(|s| ms(s.total)).collect();
        let mut first: Vec<f64> = samples.iter().map(|s| ms(s.first_byte)).collect();
        total.sort_by(f64::total_cmp);
        first.sort_by(f64::total_cmp);
        let span = samples
            .iter()
            .map(|s| s.sent + s.total)
            .max()
            .zip(samples.iter().map(|s| s.sent).min())
            .map(|(end, start)| end.saturating_sub(start));
        let rps = span
            .filter(|s| !s.is_zero())
            .map(|s| samples.len() as f64 / s.as_secs_f64());
        Summary {
            requests: samples.len(),
            errors,
            first_error,
            p50_ms: at(&total, 0.5),
            p99_ms: at(&total, 0.99),
            ttfb_p50_ms: at(&first, 0.5),
            ttfb_p99_ms: at(&first, 0.99),
            rps,
        }
    }
}

/// `a - b` when both are known.
pub fn minus(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? - b?)
}

/// Rounded to a hundredth (a microsecond resolution means nothing on a shared machine).
pub fn round2(v: Option<f64>) -> Option<f64> {
    v.map(|v| (v * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_rate() {
        let samples: Vec<Sample> = (0..100)
            .map(|i| Sample {
                sent: Duration::from_millis(i * 10),
                total: Duration::from_millis(i + 1),
                first_byte: Duration::from_millis(1),
            })
            .collect();
        let s = Summary::of(&samples, 0, None);
        assert_eq!(s.p50_ms, Some(51.0));
        assert_eq!(s.p99_ms, Some(99.0));
        assert_eq!(s.ttfb_p50_ms, Some(1.0));
        let rps = s.rps.unwrap_or_default();
        assert!((rps - 100.0 / 1.09).abs() < 0.01, "{rps}");
        assert_eq!(Summary::of(&[], 2, None).p50_ms, None);
    }
}

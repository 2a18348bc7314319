//! Lateness and latency figures: a histogram of 100 µs buckets merged across replicas, quantiles of
//! timed calls, and their formatting in the tables.

use std::collections::BTreeMap;
use std::time::Duration;

/// Lateness histogram buckets are 100 µs wide, up to a minute.
const BUCKET_US: u64 = 100;

pub(crate) fn ms(micros: u64) -> String {
    format!("{:.1} ms", micros as f64 / 1000.0)
}

pub(crate) fn ms_d(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

pub(crate) fn quantile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    let i = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1;
    values[i]
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Histogram {
    buckets: BTreeMap<u64, u64>,
    pub(crate) count: u64,
    pub(crate) max: u64,
}

impl Histogram {
    pub(crate) fn add(&mut self, micros: u64) {
        *self.buckets.entry(micros / BUCKET_US).or_default() += 1;
        self.count += 1;
        self.max = self.max.max(micros);
    }

    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (b, n) in &other.buckets {
            *self.buckets.entry(*b).or_default() += n;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// The upper edge of the bucket holding the `q` quantile, in µs.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.count as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return ((b + 1) * BUCKET_US).min(self.max.max(1));
            }
        }
        self.max
    }

    pub(crate) fn encode(&self) -> String {
        self.buckets
            .iter()
            .map(|(b, n)| format!("{b}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(crate) fn decode(text: &str, max: u64) -> Histogram {
        let mut h = Histogram {
            max,
            ..Histogram::default()
        };
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            if let Some((b, n)) = pair.split_once(':') {
                let (b, n) = (b.parse().unwrap_or(0), n.parse().unwrap_or(0));
                *h.buckets.entry(b).or_default() += n;
                h.count += n;
            }
        }
        h
    }
}

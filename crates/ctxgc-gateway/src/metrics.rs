//! What the gateway did and what the provider reported, per conversation and in total, as
//! Prometheus text at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use crate::usage::Usage;

/// Conversations listed one by one at most; later ones count only in the totals.
pub const MAX_SESSIONS_LISTED: usize = 10_000;

/// A metric: its name, its help text and how to read it from counters.
type Series = (&'static str, &'static str, fn(&Counters) -> u64);

/// Counters of one conversation (or of all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests answered.
    pub requests: u64,
    /// Requests compiled on the incremental path.
    pub incremental: u64,
    /// Bytes of the conversation bodies as the clients sent them.
    pub bytes_in: u64,
    /// Bytes of the same bodies as sent upstream.
    pub bytes_out: u64,
    /// Provider-reported usage, summed.
    pub usage: Usage,
}

impl Counters {
    fn add(&mut self, record: &Record) {
        self.requests += 1;
        self.incremental += u64::from(record.incremental);
        self.bytes_in += record.bytes_in;
        self.bytes_out += record.bytes_out;
        self.usage.input_tokens += record.usage.input_tokens;
        self.usage.output_tokens += record.usage.output_tokens;
        self.usage.cache_read_tokens += record.usage.cache_read_tokens;
        self.usage.cache_write_tokens += record.usage.cache_write_tokens;
    }
}

/// One finished request, as counted.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// The conversation, when the request carried one.
    pub session: Option<String>,
    /// The keyed hash of its credentials, when it had any.
    pub tenant: Option<String>,
    /// Compiled on the incremental path.
    pub incremental: bool,
    /// Body bytes in.
    pub bytes_in: u64,
    /// Body bytes out.
    pub bytes_out: u64,
    /// Provider usage.
    pub usage: Usage,
    /// The status sent to the client.
    pub status: u16,
    /// What the gateway added before the request went upstream, in microseconds.
    pub overhead_us: u64,
}

/// Upper bounds (seconds) of the overhead histogram's buckets: from 50 µs, where a request
/// the gateway only forwards lands, to a second.
pub const OVERHEAD_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.0025, 0.005, 0.01, 0.025, 0.1,
    0.25, 1.0,
];

/// A Prometheus histogram of overheads: counts per bucket (not cumulative), the sum and
/// the count.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; OVERHEAD_BUCKETS.len()],
    sum_us: u64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, us: u64) {
        let seconds = us as f64 / 1e6;
        if let Some(i) = OVERHEAD_BUCKETS.iter().position(|&le| seconds <= le) {
            self.buckets[i] += 1;
        }
        self.sum_us += us;
        self.count += 1;
    }

    fn render(&self, out: &mut String) {
        let name = "ctxgc_gateway_overhead_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time the gateway added before a request went upstream (parse, compile, store)."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0;
        for (le, n) in OVERHEAD_BUCKETS.iter().zip(self.buckets) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum_us as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

#[derive(Debug, Default)]
struct Inner {
    total: Counters,
    /// By (session name, tenant).
    sessions: BTreeMap<(String, String), Counters>,
    statuses: BTreeMap<u16, u64>,
    overhead: Histogram,
}

/// The gateway's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    /// Counts a finished request.
    pub fn record(&self, record: &Record) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.total.add(record);
        *inner.statuses.entry(record.status).or_default() += 1;
        inner.overhead.observe(record.overhead_us);
        if let Some(s) = &record.session {
            let listed = inner.sessions.len();
            let key = (s.clone(), record.tenant.clone().unwrap_or_default());
            match inner.sessions.get_mut(&key) {
                Some(c) => c.add(record),
                None if listed < MAX_SESSIONS_LISTED => {
                    let mut c = Counters::default();
                    c.add(record);
                    inner.sessions.insert(key, c);
                }
                None => {}
            }
        }
    }

    /// The totals so far.
    pub fn total(&self) -> Counters {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// The counters of one conversation: its session name and its tenant (`None` for
    /// requests without credentials).
    pub fn session(&self, name: &str, tenant: Option<&str>) -> Option<Counters> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .sessions
            .get(&(name.to_owned(), tenant.unwrap_or_default().to_owned()))
            .copied()
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        let series: [Series; 8] = [
            ("requests_total", "Requests answered.", |c| c.requests),
            (
                "incremental_total",
                "Requests whose conversation was compiled incrementally.",
                |c| c.incremental,
            ),
            (
                "body_bytes_in_total",
                "Conversation body bytes as clients sent them.",
                |c| c.bytes_in,
            ),
            (
                "body_bytes_out_total",
                "Conversation body bytes as sent upstream.",
                |c| c.bytes_out,
            ),
            (
                "input_tokens_total",
                "Input tokens the provider reported.",
                |c| c.usage.input_tokens,
            ),
            (
                "output_tokens_total",
                "Output tokens the provider reported.",
                |c| c.usage.output_tokens,
            ),
            (
                "cache_read_tokens_total",
                "Input tokens the provider read from its prompt cache.",
                |c| c.usage.cache_read_tokens,
            ),
            (
                "cache_write_tokens_total",
                "Input tokens the provider wrote to its prompt cache.",
                |c| c.usage.cache_write_tokens,
            ),
        ];
        for (name, help, get) in series {
            let _ = writeln!(out, "# HELP ctxgc_gateway_{name} {help}");
            let _ = writeln!(out, "# TYPE ctxgc_gateway_{name} counter");
            let _ = writeln!(out, "ctxgc_gateway_{name} {}", get(&inner.total));
            for ((session, tenant), c) in &inner.sessions {
                let tenant = if tenant.is_empty() {
                    String::new()
                } else {
                    format!(",tenant=\"{}\"", escape_label(tenant))
                };
                let _ = writeln!(
                    out,
                    "ctxgc_gateway_{name}{{session=\"{}\"{tenant}}} {}",
                    escape_label(session),
                    get(c)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP ctxgc_gateway_responses_total Responses by status code."
        );
        let _ = writeln!(out, "# TYPE ctxgc_gateway_responses_total counter");
        for (status, n) in &inner.statuses {
            let _ = writeln!(
                out,
                "ctxgc_gateway_responses_total{{code=\"{status}\"}} {n}"
            );
        }
        inner.overhead.render(&mut out);
        out
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

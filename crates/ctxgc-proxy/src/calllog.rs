//! One stderr line per call: tool, tokens from the upstream, tokens to the agent (exact BPE),
//! fields hidden, `expand` requests and the session total. Never stdout: in stdio mode stdout
//! carries the protocol alone.

use std::sync::Mutex;

/// One call as the log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// The tool as the agent named it.
    pub tool: String,
    /// Tokens of the upstream's output (0 for `expand` and the done tool).
    pub tokens_from_upstream: usize,
    /// Tokens of what the agent received.
    pub tokens_to_agent: usize,
    /// Fields hidden from this output, as its footer lists them (a list or object hidden
    /// whole counts once).
    pub fields_hidden: usize,
    /// Whether this call was an `expand`.
    pub is_expand: bool,
    /// Why the output was not trimmed or failed, when it matters (error, excluded...).
    pub note: Option<String>,
}

/// Running totals of a proxy session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Calls handled (expand and done included).
    pub calls: usize,
    /// Tokens received from upstreams.
    pub tokens_from_upstream: usize,
    /// Tokens sent to the agent.
    pub tokens_to_agent: usize,
    /// `expand` requests.
    pub expands: usize,
}

/// Writes the per-call line and keeps the session totals.
#[derive(Debug, Default)]
pub struct CallLog {
    quiet: bool,
    totals: Mutex<Totals>,
    recent: Mutex<std::collections::VecDeque<CallRecord>>,
}

/// Calls kept for [`CallLog::recent`].
pub const RECENT_KEPT: usize = 256;

impl CallLog {
    /// A log; `quiet` silences the lines (the totals are still kept).
    pub fn new(quiet: bool) -> Self {
        CallLog {
            quiet,
            totals: Mutex::new(Totals::default()),
            recent: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Whether lines are printed (when not, nobody reads the counts, and the proxy skips
    /// counting tokens: it is the costliest part of forwarding a bulky output).
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// The totals so far.
    pub fn totals(&self) -> Totals {
        self.totals.lock().map(|t| *t).unwrap_or_default()
    }

    /// The last [`RECENT_KEPT`] calls, oldest first (what the lines showed).
    pub fn recent(&self) -> Vec<CallRecord> {
        self.recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds `record` to the totals and prints its line (unless quiet). Returns the totals
    /// with this call counted (its number is `calls`).
    pub fn record(&self, record: &CallRecord) -> Totals {
        if let Ok(mut recent) = self.recent.lock() {
            if recent.len() == RECENT_KEPT {
                recent.pop_front();
            }
            recent.push_back(record.clone());
        }
        let totals = {
            let Ok(mut totals) = self.totals.lock() else {
                return Totals::default();
            };
            totals.calls += 1;
            totals.tokens_from_upstream += record.tokens_from_upstream;
            totals.tokens_to_agent += record.tokens_to_agent;
            if record.is_expand {
                totals.expands += 1;
            }
            *totals
        };
        if !self.quiet {
            eprintln!("{}", format_line(record, &totals));
        }
        totals
    }
}

/// The line for `record` after it was added to `totals`.
///
/// ```
/// use ctxgc_proxy::calllog::{format_line, CallRecord, Totals};
/// let r = CallRecord { tool: "search".into(), tokens_from_upstream: 5210, tokens_to_agent: 1133,
///     fields_hidden: 14, is_expand: false, note: None };
/// let t = Totals { calls: 1, tokens_from_upstream: 5210, tokens_to_agent: 1133, expands: 0 };
/// assert_eq!(format_line(&r, &t),
///     "ctxgc proxy: search: 5210 tokens from upstream -> 1133 to agent, 14 fields hidden | expands 0 | session 5210 -> 1133 (-78.3%)");
/// ```
pub fn format_line(record: &CallRecord, totals: &Totals) -> String {
    let call = if record.is_expand {
        format!(
            "ctxgc proxy: {}: {} tokens to agent (expand)",
            record.tool, record.tokens_to_agent
        )
    } else {
        format!(
            "ctxgc proxy: {}: {} tokens from upstream -> {} to agent, {} fields hidden",
            record.tool, record.tokens_from_upstream, record.tokens_to_agent, record.fields_hidden
        )
    };
    let note = record
        .note
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    let change = if totals.tokens_from_upstream == 0 {
        String::new()
    } else {
        let pct = (totals.tokens_to_agent as f64 - totals.tokens_from_upstream as f64) * 100.0
            / totals.tokens_from_upstream as f64;
        format!(" ({pct:+.1}%)")
    };
    format!(
        "{call}{note} | expands {} | session {} -> {}{change}",
        totals.expands, totals.tokens_from_upstream, totals.tokens_to_agent
    )
}

//! What the gateway and the MCP proxy saved, kept in the store they share with the sessions,
//! so that a console (or any reader) sees it after the process that saved it has gone.
//!
//! One [`SavingsRecord`] per compiled gateway request and per trimmed proxy tool call: the
//! tokens before and after, and what the provider billed when the answer said so. Records
//! are only ever added. The core has no clock: the writer supplies the time.
//!
//! Every backend reads records back in one order, [`canonical_order`]: by session, time,
//! source, ordinal, then the remaining fields, so that identical stores read identically.
//!
//! ```
//! use ctxgc_core::store::savings::{ProviderUsage, SavingsRecord, SavingsSource, totals};
//! use ctxgc_core::store::{MemoryStore, Store};
//!
//! let mut store = MemoryStore::new();
//! let record = SavingsRecord {
//!     source: SavingsSource::Gateway,
//!     context_id: "gw-chat".into(),
//!     ordinal: 3,
//!     tool: "/v1/messages".into(),
//!     tokens_before: 12_000,
//!     tokens_after: 4_000,
//!     usage: Some(ProviderUsage { input_tokens: 800, cache_read_tokens: 3_200, ..Default::default() }),
//!     at_ms: 1_767_225_600_000,
//! };
//! store.record_savings(&record).unwrap();
//! let read = store.savings(Some("gw-chat")).unwrap();
//! assert_eq!(read, [record]);
//! let sums = totals(&read);
//! assert_eq!((sums[0].source, sums[0].tokens_saved), (SavingsSource::Gateway, 8_000));
//! ```

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// The part of ctxgc that saved the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SavingsSource {
    /// `ctxgc gateway`: a conversation request compiled before it went upstream.
    Gateway,
    /// `ctxgc proxy`: an MCP tool output trimmed before it reached the agent.
    Proxy,
}

impl SavingsSource {
    /// Every source, in order.
    pub const ALL: [SavingsSource; 2] = [SavingsSource::Gateway, SavingsSource::Proxy];

    /// The name stored and shown (`gateway`, `proxy`).
    pub fn name(self) -> &'static str {
        match self {
            SavingsSource::Gateway => "gateway",
            SavingsSource::Proxy => "proxy",
        }
    }

    /// The source of a stored name.
    ///
    /// ```
    /// use ctxgc_core::store::savings::SavingsSource;
    /// assert_eq!(SavingsSource::from_name("proxy"), Some(SavingsSource::Proxy));
    /// assert_eq!(SavingsSource::from_name("Proxy"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<SavingsSource> {
        SavingsSource::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Token counts a provider reported for one request.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct ProviderUsage {
    /// Input tokens as the provider reported them (OpenAI: all prompt tokens, cached ones
    /// included; Anthropic: uncached input only).
    pub input_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (Anthropic).
    pub cache_write_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl ProviderUsage {
    fn add(&mut self, other: &ProviderUsage) {
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// What one gateway request or one proxy tool call saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavingsRecord {
    /// Who saved.
    pub source: SavingsSource,
    /// The store session: the gateway's conversation (`gw-...`), or the session under which
    /// the proxy keeps its originals.
    pub context_id: String,
    /// Where in the session: the gateway, how many messages the request carried; the
    /// proxy, the call's number since the proxy started (from 1).
    pub ordinal: u64,
    /// The gateway's endpoint (`/v1/messages`, ...) or the proxy's tool.
    pub tool: String,
    /// Tokens as the client or the upstream tool sent them.
    pub tokens_before: u64,
    /// Tokens after compiling or trimming: what was sent on.
    pub tokens_after: u64,
    /// What the provider billed, when its answer said (`None`: unknown, as for every proxy
    /// call, or an answer that carried no usage).
    pub usage: Option<ProviderUsage>,
    /// When, in milliseconds since the Unix epoch (the writer's clock).
    pub at_ms: u64,
}

impl SavingsRecord {
    /// Tokens saved (never negative: a request compiling larger saves 0).
    pub fn tokens_saved(&self) -> u64 {
        self.tokens_before.saturating_sub(self.tokens_after)
    }
}

/// The order every backend reads records in: session, time, source, ordinal, tool, tokens
/// before, tokens after, usage (strings compared byte by byte).
pub fn canonical_order(a: &SavingsRecord, b: &SavingsRecord) -> Ordering {
    a.context_id
        .as_bytes()
        .cmp(b.context_id.as_bytes())
        .then(a.at_ms.cmp(&b.at_ms))
        .then(a.source.cmp(&b.source))
        .then(a.ordinal.cmp(&b.ordinal))
        .then(a.tool.as_bytes().cmp(b.tool.as_bytes()))
        .then(a.tokens_before.cmp(&b.tokens_before))
        .then(a.tokens_after.cmp(&b.tokens_after))
        .then(a.usage.cmp(&b.usage))
}

/// Sums of the records of one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SavingsTotals {
    /// The source.
    pub source: SavingsSource,
    /// How many records.
    pub records: u64,
    /// Tokens before, summed.
    pub tokens_before: u64,
    /// Tokens after, summed.
    pub tokens_after: u64,
    /// Tokens saved, summed per record (a record that grew counts 0).
    pub tokens_saved: u64,
    /// How many records carry provider usage.
    pub with_usage: u64,
    /// Provider usage, summed over the records that carry it.
    pub usage: ProviderUsage,
}

/// The totals per source, in source order; a source without records is left out.
pub fn totals(records: &[SavingsRecord]) -> Vec<SavingsTotals> {
    SavingsSource::ALL
        .into_iter()
        .filter_map(|source| {
            let mut sum = SavingsTotals {
                source,
                records: 0,
                tokens_before: 0,
                tokens_after: 0,
                tokens_saved: 0,
                with_usage: 0,
                usage: ProviderUsage::default(),
            };
            for r in records.iter().filter(|r| r.source == source) {
                sum.records += 1;
                sum.tokens_before += r.tokens_before;
                sum.tokens_after += r.tokens_after;
                sum.tokens_saved += r.tokens_saved();
                if let Some(usage) = &r.usage {
                    sum.with_usage += 1;
                    sum.usage.add(usage);
                }
            }
            (sum.records > 0).then_some(sum)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(context_id: &str, at_ms: u64, source: SavingsSource, ordinal: u64) -> SavingsRecord {
        SavingsRecord {
            source,
            context_id: context_id.into(),
            ordinal,
            tool: "t".into(),
            tokens_before: 100,
            tokens_after: 140,
            usage: None,
            at_ms,
        }
    }

    #[test]
    fn the_order_is_session_then_time_then_source_then_ordinal() {
        let mut records = [
            record("b", 1, SavingsSource::Gateway, 1),
            record("a", 2, SavingsSource::Gateway, 1),
            record("a", 1, SavingsSource::Proxy, 1),
            record("a", 1, SavingsSource::Gateway, 2),
            record("a", 1, SavingsSource::Gateway, 1),
        ];
        records.sort_by(canonical_order);
        let keys: Vec<(&str, u64, &str, u64)> = records
            .iter()
            .map(|r| (r.context_id.as_str(), r.at_ms, r.source.name(), r.ordinal))
            .collect();
        assert_eq!(
            keys,
            [
                ("a", 1, "gateway", 1),
                ("a", 1, "gateway", 2),
                ("a", 1, "proxy", 1),
                ("a", 2, "gateway", 1),
                ("b", 1, "gateway", 1),
            ]
        );
    }

    #[test]
    fn a_record_that_grew_saves_nothing_and_totals_skip_absent_sources() {
        let grew = record("a", 1, SavingsSource::Proxy, 1);
        assert_eq!(grew.tokens_saved(), 0);
        let sums = totals(&[grew]);
        assert_eq!(sums.len(), 1);
        assert_eq!(
            (sums[0].source, sums[0].tokens_before, sums[0].tokens_saved),
            (SavingsSource::Proxy, 100, 0)
        );
        assert!(totals(&[]).is_empty());
    }
}

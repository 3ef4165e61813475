//! What each trimmed tool output saved, kept in the store that holds the originals (one
//! [`SavingsRecord`] per trimmed call, under [`PROXY_CONTEXT`]), so that `ctxgc serve` and
//! any other reader see it after the proxy has stopped; the per-call line on stderr is gone
//! with the terminal.
//!
//! A record is written on the store's own thread, like the originals, and is committed
//! before the trimmed output goes to the agent. Only calls whose output reached the agent
//! trimmed are recorded; tokens are exact (the proxy's tokenizer), of the text blocks as
//! the upstream sent them (credentials already redacted) and as the agent received them.

use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use ctxgc_core::store::Store;
use ctxgc_core::store::savings::{SavingsRecord, SavingsSource};

use crate::receipts::{Job, PROXY_CONTEXT};

/// A handle on the store thread of a [`crate::receipts::StoreReceipts`], for savings records.
#[derive(Clone)]
pub struct SavingsSink {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for SavingsSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavingsSink").finish_non_exhaustive()
    }
}

impl SavingsSink {
    pub(crate) fn new(jobs: mpsc::Sender<Job>) -> SavingsSink {
        SavingsSink { jobs }
    }

    /// Records a trimmed call: `ordinal` is the call's number since the proxy started,
    /// `tokens_before` / `tokens_after` what the upstream sent and what the agent received.
    /// Returns once the record is durable.
    ///
    /// ```
    /// use ctxgc_core::store::Store;
    /// use ctxgc_proxy::receipts::{PROXY_CONTEXT, StoreReceipts};
    /// let dir = tempfile::tempdir().unwrap();
    /// let location = ctxgc_store::Location::Sqlite(dir.path().join("ctxgc.db"));
    /// let receipts = StoreReceipts::open(&location).unwrap();
    /// receipts.savings_sink().record(3, "search", 5210, 1133).unwrap();
    /// drop(receipts);
    /// let mut store = ctxgc_store::open(&location).unwrap();
    /// let records = store.savings(Some(PROXY_CONTEXT)).unwrap();
    /// assert_eq!((records[0].ordinal, records[0].tokens_saved()), (3, 4077));
    /// ```
    pub fn record(
        &self,
        ordinal: u64,
        tool: &str,
        tokens_before: u64,
        tokens_after: u64,
    ) -> Result<(), String> {
        let record = SavingsRecord {
            source: SavingsSource::Proxy,
            context_id: PROXY_CONTEXT.to_owned(),
            ordinal,
            tool: tool.to_owned(),
            tokens_before,
            tokens_after,
            usage: None,
            at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        let (reply, answer) = mpsc::channel();
        self.jobs
            .send(Box::new(move |store| {
                let _ = reply.send(store.record_savings(&record));
            }))
            .map_err(|_| "the store thread has stopped".to_owned())?;
        answer
            .recv()
            .map_err(|_| "the store thread has stopped".to_owned())?
            .map_err(|e| e.to_string())
    }
}

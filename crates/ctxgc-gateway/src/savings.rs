//! What each compiled request saved, kept in the gateway's store (one
//! [`SavingsRecord`] per request) so that `ctxgc serve` and any other reader see it after
//! the gateway has stopped; `/metrics` keeps only this process's counts.
//!
//! A record is written once the answer is over (the provider's usage is read from it), on a
//! blocking thread: counting the tokens of two request bodies and a store write never delay
//! an answer. Only requests the upstream answered with success count: a refused request
//! saved nothing. Tokens are those of the whole request body (envelope and messages) as the
//! client sent it and as it went upstream, counted with the compiler's tokenizer entry by
//! entry and message by message (see [`body_tokens`]): a message is counted once in the
//! conversation's life (the count cache knows it by its content hash), so the record of the
//! thousandth request costs what that request added, not what the conversation holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use ctxgc_core::store::Store;
use ctxgc_core::store::savings::{ProviderUsage, SavingsRecord, SavingsSource};
use ctxgc_core::{Format, Tokenizer};

use crate::server::Gateway;
use crate::sessions::Compiled;
use crate::usage::Usage;

/// A compiled request whose record waits for its answer.
#[derive(Debug)]
pub(crate) struct Pending {
    context_id: String,
    ordinal: u64,
    endpoint: String,
    format: Option<Format>,
    before: Bytes,
    after: Bytes,
}

impl Pending {
    /// The record-to-be of a request, when it was compiled (`before`: the body as the client
    /// sent it; `after`: as it goes upstream).
    pub(crate) fn of(
        compiled: Option<&Compiled>,
        format: Option<Format>,
        endpoint: &str,
        before: &Bytes,
        after: &Bytes,
    ) -> Option<Pending> {
        compiled.map(|c| Pending {
            context_id: c.context_id.clone(),
            ordinal: c.items as u64,
            endpoint: endpoint.to_owned(),
            format,
            before: before.clone(),
            after: after.clone(),
        })
    }
}

/// Records being written: a caller can wait until every one has landed.
#[derive(Debug, Default)]
pub struct SavingsWrites {
    pending: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl SavingsWrites {
    fn start(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    fn finish(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }
}

impl Gateway {
    /// Waits until the savings record of every answer finished so far is in the store (a
    /// test, or a shutdown, that must not lose the last ones).
    pub async fn savings_settled(&self) {
        loop {
            let idle = self.savings.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.savings.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// One record being written; dropping it (written, failed, or dropped unrun by a runtime
/// shutting down) counts it finished.
struct Writing(Arc<Gateway>);

impl Writing {
    fn start(gateway: Arc<Gateway>) -> Writing {
        gateway.savings.start();
        Writing(gateway)
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        self.0.savings.finish();
    }
}

/// Provider usage as stored: unknown when the answer reported none.
fn known(usage: Usage) -> Option<ProviderUsage> {
    (usage != Usage::default()).then_some(ProviderUsage {
        input_tokens: usage.input_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        output_tokens: usage.output_tokens,
    })
}

/// Writes the record of a finished request, on a blocking thread when a runtime is running
/// (inline otherwise). A failure is reported on stderr: the client has had its answer.
pub(crate) fn record(gateway: &Arc<Gateway>, pending: Pending, usage: Usage, status: u16) {
    let Some(sessions) = gateway.sessions().cloned() else {
        return;
    };
    if !(200..300).contains(&status) {
        return;
    }
    let at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let tokenizer = sessions.options().tokenizer;
    let writing = Writing::start(gateway.clone());
    let job = move || {
        let _writing = writing;
        let count = |body: &Bytes| body_tokens(tokenizer, pending.format, body);
        let record = SavingsRecord {
            source: SavingsSource::Gateway,
            tokens_before: count(&pending.before),
            tokens_after: count(&pending.after),
            context_id: pending.context_id,
            ordinal: pending.ordinal,
            tool: pending.endpoint,
            usage: known(usage),
            at_ms,
        };
        if let Err(e) = sessions.with_store(|s| s.record_savings(&record)) {
            eprintln!(
                "ctxgc gateway: the savings of a request to {} in {} were not recorded: {e}",
                record.tool, record.context_id
            );
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn_blocking(job);
        }
        Err(_) => job(),
    }
}

/// The tokens of a request body as a savings record counts them: of each top-level key and value, the item list counted
/// message by message. Messages and long values are remembered by content hash (the
/// tokenizer's count cache, short ones too), so a conversation's later requests count only
/// what they add.
/// This differs from counting the body as one text by at most a few tokens per message
/// (where a message's JSON meets its neighbour's), the same way for the body sent and the
/// body received. A body the request parser does not read is counted as one text.
pub fn body_tokens(tokenizer: Tokenizer, format: Option<Format>, body: &[u8]) -> u64 {
    let parsed = format.and_then(|f| crate::request::parse(body, f).ok());
    let Some(crate::request::Parsed::Conversation(conversation)) = parsed else {
        return tokenizer.count_uncached(&String::from_utf8_lossy(body)) as u64;
    };
    let mut total = 0;
    for (key, value) in &conversation.entries {
        total += tokenizer.count(key);
        total += if key == conversation.items_key {
            conversation
                .messages
                .iter()
                .map(|m| tokenizer.count_cached(m.get()))
                .sum()
        } else {
            tokenizer.count(value.get())
        };
    }
    total as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_counted_entry_by_entry_close_to_the_whole_text() {
        let tokenizer = Tokenizer::default();
        let messages: Vec<String> = (0..50)
            .map(|i| {
                format!(r#"{{"role":"user","content":"question {i}: where is flight UA{i}?"}}"#)
            })
            .collect();
        let body = format!(
            r#"{{"model":"gpt-4o","messages":[{}],"stream":true}}"#,
            messages.join(",")
        );
        let whole = tokenizer.count_uncached(&body) as u64;
        let counted = body_tokens(tokenizer, Some(Format::OpenaiChat), body.as_bytes());
        // A few tokens per message at most, where one message's JSON meets the next.
        assert!(
            counted.abs_diff(whole) <= 3 * messages.len() as u64,
            "{counted} vs {whole}"
        );
        // Deterministic, and a body the parser cannot read is counted as one text.
        assert_eq!(
            counted,
            body_tokens(tokenizer, Some(Format::OpenaiChat), body.as_bytes())
        );
        assert_eq!(
            body_tokens(tokenizer, Some(Format::OpenaiChat), b"not json"),
            tokenizer.count_uncached("not json") as u64
        );
        assert_eq!(body_tokens(tokenizer, None, body.as_bytes()), whole);
    }
}

//! Savings records as both backends store them: one row per record, integers as signed
//! 64-bit (what SQLite and PostgreSQL hold), provider usage as four nullable columns (all
//! null when unknown). The read order is [`ctxgc_core::store::savings::canonical_order`],
//! spelled out in SQL by each backend.

use ctxgc_core::store::StoreError;
use ctxgc_core::store::savings::{ProviderUsage, SavingsRecord, SavingsSource};

/// A record in column form.
pub(crate) struct SavingsRow {
    pub source: &'static str,
    pub context_id: String,
    pub ordinal: i64,
    pub tool: String,
    pub tokens_before: i64,
    pub tokens_after: i64,
    /// input, cache read, cache write, output.
    pub usage: [Option<i64>; 4],
    pub at_ms: i64,
}

fn to_i64(backend: &'static str, value: u64, field: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Backend {
        backend,
        message: format!("savings record: {field} {value} is out of range"),
    })
}

/// The row of a record; a count beyond `i64::MAX` is refused, naming the field.
pub(crate) fn encode(backend: &'static str, r: &SavingsRecord) -> Result<SavingsRow, StoreError> {
    let usage = match &r.usage {
        Some(u) => [
            Some(to_i64(backend, u.input_tokens, "input_tokens")?),
            Some(to_i64(backend, u.cache_read_tokens, "cache_read_tokens")?),
            Some(to_i64(backend, u.cache_write_tokens, "cache_write_tokens")?),
            Some(to_i64(backend, u.output_tokens, "output_tokens")?),
        ],
        None => [None; 4],
    };
    Ok(SavingsRow {
        source: r.source.name(),
        context_id: r.context_id.clone(),
        ordinal: to_i64(backend, r.ordinal, "ordinal")?,
        tool: r.tool.clone(),
        tokens_before: to_i64(backend, r.tokens_before, "tokens_before")?,
        tokens_after: to_i64(backend, r.tokens_after, "tokens_after")?,
        usage,
        at_ms: to_i64(backend, r.at_ms, "at_ms")?,
    })
}

/// The record of a row read back; a damaged row is named by its session and field.
pub(crate) fn decode(
    source: &str,
    context_id: String,
    numbers: [i64; 4],
    tool: String,
    usage: [Option<i64>; 4],
) -> Result<SavingsRecord, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        context_id: context_id.clone(),
        message: format!("savings record: {message}"),
    };
    let unsigned = |value: i64, field: &str| {
        u64::try_from(value).map_err(|_| corrupt(format!("negative {field} {value}")))
    };
    let source = SavingsSource::from_name(source)
        .ok_or_else(|| corrupt(format!("unknown source {source:?}")))?;
    let [ordinal, tokens_before, tokens_after, at_ms] = numbers;
    let usage = match usage {
        [Some(input), Some(read), Some(write), Some(output)] => Some(ProviderUsage {
            input_tokens: unsigned(input, "input_tokens")?,
            cache_read_tokens: unsigned(read, "cache_read_tokens")?,
            cache_write_tokens: unsigned(write, "cache_write_tokens")?,
            output_tokens: unsigned(output, "output_tokens")?,
        }),
        [None, None, None, None] => None,
        _ => return Err(corrupt("provider usage is partly missing".into())),
    };
    Ok(SavingsRecord {
        source,
        ordinal: unsigned(ordinal, "ordinal")?,
        tool,
        tokens_before: unsigned(tokens_before, "tokens_before")?,
        tokens_after: unsigned(tokens_after, "tokens_after")?,
        usage,
        at_ms: unsigned(at_ms, "at_ms")?,
        context_id,
    })
}

//! What the provider says a request cost, read from the answer as it passes (never held
//! back): the `usage` of a JSON answer, or of the events of a server-sent-event stream.
//!
//! Fields read: OpenAI Chat `prompt_tokens`, `completion_tokens`,
//! `prompt_tokens_details.cached_tokens`; OpenAI Responses `input_tokens`, `output_tokens`,
//! `input_tokens_details.cached_tokens` (under `response` in stream events); Anthropic
//! `input_tokens`, `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`
//! (under `message` in `message_start`, then in `message_delta`).

use serde_json::Value;

/// Token counts the provider reported for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Input tokens billed at the full price (Anthropic: uncached input; OpenAI: prompt
    /// tokens, which include the cached ones).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (Anthropic).
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Merges a later report (streams repeat and complete counts: the largest wins).
    fn merge(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.max(other.input_tokens);
        self.output_tokens = self.output_tokens.max(other.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.max(other.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.max(other.cache_write_tokens);
    }

    /// Reads a `usage` object of any of the three APIs.
    ///
    /// ```
    /// use ctxgc_gateway::usage::Usage;
    /// let u = Usage::from_usage(&serde_json::json!({
    ///     "prompt_tokens": 1200, "completion_tokens": 5,
    ///     "prompt_tokens_details": {"cached_tokens": 1024}
    /// }));
    /// assert_eq!((u.input_tokens, u.cache_read_tokens), (1200, 1024));
    /// ```
    pub fn from_usage(usage: &Value) -> Usage {
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input_tokens: n(usage
                .get("prompt_tokens")
                .or_else(|| usage.get("input_tokens"))),
            output_tokens: n(usage
                .get("completion_tokens")
                .or_else(|| usage.get("output_tokens"))),
            cache_read_tokens: n(usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .or_else(|| usage.pointer("/input_tokens_details/cached_tokens"))
                .or_else(|| usage.get("cache_read_input_tokens"))),
            cache_write_tokens: n(usage.get("cache_creation_input_tokens")),
        }
    }

    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

/// The usage inside one JSON answer or event, wherever the API puts it.
fn usage_in(value: &Value) -> Option<Usage> {
    value
        .get("usage")
        .or_else(|| value.pointer("/message/usage"))
        .or_else(|| value.pointer("/response/usage"))
        .filter(|u| u.is_object())
        .map(Usage::from_usage)
}

/// The most of an answer kept for reading its usage: a JSON answer larger than this is
/// passed on whole but not read.
const MAX_JSON_ANSWER: usize = 16 * 1024 * 1024;
/// The longest stream line kept while waiting for its end.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// Reads usage from an answer's bytes as they pass.
#[derive(Debug)]
pub struct UsageReader {
    stream: bool,
    buffer: Vec<u8>,
    overflow: bool,
    usage: Usage,
}

impl UsageReader {
    /// A reader for a server-sent-event stream (`stream`) or a JSON answer.
    pub fn new(stream: bool) -> UsageReader {
        UsageReader {
            stream,
            buffer: Vec::new(),
            overflow: false,
            usage: Usage::default(),
        }
    }

    /// Reads the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        if !self.stream {
            if self.buffer.len() + chunk.len() > MAX_JSON_ANSWER {
                self.overflow = true;
                self.buffer = Vec::new();
            }
            if !self.overflow {
                self.buffer.extend_from_slice(chunk);
            }
            return;
        }
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            if self.overflow {
                self.overflow = false;
            } else {
                self.buffer.extend_from_slice(&rest[..end]);
                let line = std::mem::take(&mut self.buffer);
                self.line(&line);
            }
            rest = &rest[end + 1..];
        }
        if !self.overflow {
            if self.buffer.len() + rest.len() > MAX_LINE {
                self.overflow = true;
                self.buffer.clear();
            } else {
                self.buffer.extend_from_slice(rest);
            }
        }
    }

    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        // Only events that can carry usage are parsed.
        if !data.windows(7).any(|w| w == b"\"usage\"") {
            return;
        }
        if let Ok(value) = serde_json::from_slice::<Value>(data)
            && let Some(u) = usage_in(&value)
        {
            self.usage.merge(u);
        }
    }

    /// The usage reported, once the answer is over.
    pub fn finish(mut self) -> Usage {
        if self.stream {
            let rest = std::mem::take(&mut self.buffer);
            self.line(&rest);
        } else if !self.overflow
            && let Ok(value) = serde_json::from_slice::<Value>(&self.buffer)
            && let Some(u) = usage_in(&value)
        {
            self.usage.merge(u);
        }
        self.usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_stream_usage_is_read_across_chunk_boundaries() {
        let stream = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":4000,\"cache_creation_input_tokens\":300,\"output_tokens\":1}}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n",
        );
        let mut reader = UsageReader::new(true);
        for chunk in stream.as_bytes().chunks(7) {
            reader.feed(chunk);
        }
        let u = reader.finish();
        assert_eq!(
            u,
            Usage {
                input_tokens: 12,
                output_tokens: 42,
                cache_read_tokens: 4000,
                cache_write_tokens: 300
            }
        );
    }

    #[test]
    fn json_answer_usage_and_garbage() {
        let mut reader = UsageReader::new(false);
        reader.feed(br#"{"id":"x","usage":{"input_tokens":10,"output_tokens":2,"input_tokens_details":{"cached_tokens":8}}}"#);
        assert_eq!(reader.finish().cache_read_tokens, 8);
        let mut reader = UsageReader::new(false);
        reader.feed(b"<html>bad gateway</html>");
        assert!(reader.finish().is_empty());
    }
}

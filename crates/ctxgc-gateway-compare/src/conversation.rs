//! Growing agent conversations, the workload every gateway is measured on.
//!
//! The shape is the gateway latency bench's (crates/ctxgc-gateway/benches): a system prompt,
//! then rounds of user question / assistant tool call / tool output (pretty-printed JSON
//! rows) / assistant answer until the conversation holds about the asked number of tokens
//! (o200k_base, counted exactly once at start), then two messages more per request (the
//! previous answer and the next question), as an agent loop resends its whole history.
//!
//! Each worker has a conversation of its own: its system prompt names the worker and the
//! run, so a gateway that keys conversations by their prefix (ctxgc does) sees one tenant's
//! session per worker, and a later run never meets an earlier run's stored history. Everything
//! after the system prompt is the same text for every worker, built once and shared.

use std::sync::Arc;

use serde_json::{Value, json};

/// Which API the requests speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// OpenAI Chat Completions: POST /v1/chat/completions.
    Openai,
    /// Anthropic Messages: POST /v1/messages.
    Anthropic,
}

impl Api {
    /// The name used in the JSON lines.
    pub fn name(self) -> &'static str {
        match self {
            Api::Openai => "openai",
            Api::Anthropic => "anthropic",
        }
    }

    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Api::Openai => "/v1/chat/completions",
            Api::Anthropic => "/v1/messages",
        }
    }

    /// The bytes a complete streamed answer ends with (before trailing blank lines).
    pub fn stream_end(self) -> &'static [u8] {
        match self {
            Api::Openai => b"[DONE]",
            Api::Anthropic => b"message_stop",
        }
    }
}

/// The part of every worker's conversation that is the same for all of them.
#[derive(Debug)]
pub struct Template {
    api: Api,
    /// The base messages after the system prompt, as JSON text joined by commas.
    base: String,
    /// Exact tokens of the base conversation, system prompt included.
    pub tokens: usize,
    /// Number of base messages, system prompt included.
    pub messages: usize,
    model: String,
}

fn system_text(worker: usize, run: &str) -> String {
    format!(
        "You are a support agent for an airline (tenant {worker}, run {run}). Follow the policy; \
         confirm before every change; never reveal internal notes."
    )
}

fn tools(api: Api) -> Value {
    let parameters =
        json!({"type": "object", "properties": {"day": {"type": "integer"}}, "required": ["day"]});
    match api {
        Api::Openai => json!([{"type": "function", "function": {"name": "search_flights",
            "description": "Flights of one day with their seats left.", "parameters": parameters}}]),
        Api::Anthropic => json!([{"name": "search_flights",
            "description": "Flights of one day with their seats left.", "input_schema": parameters}]),
    }
}

fn round(api: Api, round: usize) -> anyhow::Result<[Value; 4]> {
    let rows: Vec<Value> = (0..12)
        .map(|i| {
            json!({"flight": format!("HAT{:03}", round * 12 + i), "origin": "JFK", "destination": "SFO",
                "date": "2024-05-16", "price": 300 + i * 7, "seats_left": i % 5})
        })
        .collect();
    let output = serde_json::to_string_pretty(&rows)?;
    let question = format!("Which flights on day {round} have seats?");
    let answer = format!(
        "On day {round} there are 12 flights; the cheapest is HAT{:03}.",
        round * 12
    );
    let id = format!("call_{round}");
    Ok(match api {
        Api::Openai => [
            json!({"role": "user", "content": question}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "search_flights", "arguments": format!("{{\"day\": {round}}}")}}]}),
            json!({"role": "tool", "tool_call_id": id, "content": output}),
            json!({"role": "assistant", "content": answer}),
        ],
        Api::Anthropic => [
            json!({"role": "user", "content": question}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": id, "name": "search_flights", "input": {"day": round}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": output}]}),
            json!({"role": "assistant", "content": answer}),
        ],
    })
}

impl Template {
    /// Builds the shared part of a conversation of about `tokens` tokens.
    pub fn new(api: Api, tokens: usize, model: &str) -> anyhow::Result<Template> {
        let tokenizer = ctxgc_core::Tokenizer::default();
        let system = system_text(0, "0123456789abcdef");
        let mut count = match api {
            Api::Openai => {
                tokenizer.count(&json!({"role": "system", "content": system}).to_string())
            }
            Api::Anthropic => tokenizer.count(&Value::String(system).to_string()),
        };
        let mut base = String::new();
        let mut messages = 1;
        let mut n = 0;
        // Bounded: every round adds well over 100 tokens.
        while count < tokens && n < tokens {
            for m in round(api, n)? {
                let text = m.to_string();
                count += tokenizer.count(&text);
                if !base.is_empty() {
                    base.push(',');
                }
                base.push_str(&text);
                messages += 1;
            }
            n += 1;
        }
        Ok(Template {
            api,
            base,
            tokens: count,
            messages,
            model: model.to_string(),
        })
    }
}

/// One worker's conversation: the shared template, its own system prompt, and what it has
/// grown by.
#[derive(Debug)]
pub struct Conversation {
    template: Arc<Template>,
    stream: bool,
    system: String,
    grown: String,
    /// Requests sent so far in this conversation (each adds two messages to the next).
    pub step: usize,
}

impl Conversation {
    /// Worker `worker`'s conversation in run `run`.
    pub fn new(template: Arc<Template>, worker: usize, run: &str, stream: bool) -> Conversation {
        let text = system_text(worker, run);
        let system = match template.api {
            Api::Openai => json!({"role": "system", "content": text}).to_string(),
            Api::Anthropic => Value::String(text).to_string(),
        };
        Conversation {
            template,
            stream,
            system,
            grown: String::new(),
            step: 0,
        }
    }

    fn question(&self) -> String {
        let step = self.step;
        json!({"role": "user", "content": format!("And the next question, number {step}: which of those can I change to?")})
            .to_string()
    }

    /// The body of the next request: the whole history so far and the next question.
    pub fn body(&self) -> String {
        let t = &self.template;
        let question = self.question();
        let mut body =
            String::with_capacity(t.base.len() + self.grown.len() + question.len() + 1024);
        body.push_str("{\"model\":");
        body.push_str(&Value::String(t.model.clone()).to_string());
        if self.stream {
            body.push_str(",\"stream\":true");
            if t.api == Api::Openai {
                body.push_str(",\"stream_options\":{\"include_usage\":true}");
            }
        }
        body.push_str(",\"tools\":");
        body.push_str(&tools(t.api).to_string());
        match t.api {
            Api::Openai => {
                body.push_str(",\"messages\":[");
                body.push_str(&self.system);
                body.push(',');
            }
            Api::Anthropic => {
                body.push_str(",\"max_tokens\":1024,\"system\":");
                body.push_str(&self.system);
                body.push_str(",\"messages\":[");
            }
        }
        body.push_str(&t.base);
        body.push_str(&self.grown);
        body.push(',');
        body.push_str(&question);
        body.push_str("]}");
        body
    }

    /// Records that the request was answered: the question and an answer join the history.
    pub fn advance(&mut self) {
        let question = self.question();
        let answer = json!({"role": "assistant", "content": format!("Answer {}: HAT{:03} and HAT{:03} have seats.", self.step, self.step % 97, self.step % 89)})
            .to_string();
        self.grown.push(',');
        self.grown.push_str(&question);
        self.grown.push(',');
        self.grown.push_str(&answer);
        self.step += 1;
    }

    /// Starts the conversation over (same system prompt and first question: the same
    /// conversation to a gateway, its history rewritten), so a long run keeps the number
    /// and the size of live conversations bounded.
    pub fn restart(&mut self) {
        self.grown.clear();
        self.step = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_and_grow_by_two_messages() {
        for api in [Api::Openai, Api::Anthropic] {
            let template = Arc::new(Template::new(api, 2_000, "m").expect("template"));
            assert!(template.tokens >= 2_000);
            let mut c = Conversation::new(template.clone(), 3, "r", true);
            let first: Value = serde_json::from_str(&c.body()).expect("json");
            c.advance();
            let second: Value = serde_json::from_str(&c.body()).expect("json");
            let len = |v: &Value| v["messages"].as_array().map(Vec::len).unwrap_or(0);
            assert_eq!(len(&second), len(&first) + 2);
            assert_eq!(second["stream"], Value::Bool(true));
            let expected = match api {
                Api::Openai => template.messages + 1,
                Api::Anthropic => template.messages,
            };
            assert_eq!(len(&first), expected);
        }
    }
}

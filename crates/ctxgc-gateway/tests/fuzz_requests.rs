//! Fuzz-style properties for the gateway's request parsing: real request bodies of every
//! provider format, mutated (truncated, bytes flipped, invalid UTF-8, duplicate keys, wrong
//! types, nesting), arbitrary bytes, 10,000 and 100,000 levels of nesting and huge strings.
//!
//! Two levels: [`parse`] directly (many cases, quick), and whole requests through a real
//! gateway with its SQLite store in front of a fake provider on loopback. The properties: the
//! parser answers or names what is wrong (the body, or a field in backquotes); the gateway
//! answers every body with the upstream's answer or a 400 in the provider's error shape, never
//! a 500 (a panic while compiling would be one), and keeps serving afterwards. Upstream
//! answers are fuzzed too, through the usage reader that reads them.
//!
//! `CTXGC_FUZZ_CASES` sets the cases per property (default 32 parser cases, a quarter of that
//! over HTTP).

mod common;
#[path = "../../ctxgc-core/tests/fuzz/mutate.rs"]
mod mutate;

use std::sync::OnceLock;

use common::*;
use ctxgc_core::Format;
use ctxgc_gateway::request::{Parsed, parse};
use ctxgc_gateway::usage::UsageReader;
use mutate::{cases, mutated, mutations, nested_arrays, nested_objects};
use proptest::prelude::*;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ctxgc-core/tests/fixtures");

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{path}"))
        .unwrap_or_else(|e| panic!("fixture {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// Real request bodies, one per endpoint: (path, format, body).
fn seeds() -> &'static [(&'static str, Format, String)] {
    static SEEDS: OnceLock<Vec<(&'static str, Format, String)>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let chat = fixture("chat/airline_cabin_change.json");
        let mut anthropic = fixture("chat/anthropic_session.json");
        anthropic["model"] = json!("fake-model");
        anthropic["max_tokens"] = json!(64);
        let mut responses = fixture("chat/responses_session.json");
        responses["model"] = json!("fake-model");
        vec![
            (
                "/v1/chat/completions",
                Format::OpenaiChat,
                serde_json::to_string_pretty(&json!({"model": "fake-model", "messages": chat}))
                    .unwrap(),
            ),
            (
                "/v1/chat/completions",
                Format::OpenaiChat,
                json!({"model": "fake-model", "stream": true, "messages": chat}).to_string(),
            ),
            (
                "/v1/messages",
                Format::Anthropic,
                serde_json::to_string_pretty(&anthropic).unwrap(),
            ),
            (
                "/v1/responses",
                Format::Responses,
                serde_json::to_string_pretty(&responses).unwrap(),
            ),
        ]
    })
}

/// A parse error names the body or a field.
fn assert_clear(message: &str) {
    assert!(
        message.contains("body") || message.contains('`'),
        "an error that names neither the body nor a field: {message}"
    );
}

fn parse_case(bytes: &[u8], format: Format) {
    match parse(bytes, format) {
        Ok(Parsed::Conversation(c)) => {
            let _ = c.item_hashes();
            let _ = c.prefix_key();
            let _ = c.owned_entries();
        }
        Ok(Parsed::Nothing { .. }) => {}
        Err(e) => assert_clear(&e.0),
    }
}

/// One gateway with a SQLite store in front of a fake provider, for the whole file.
struct Env {
    runtime: tokio::runtime::Runtime,
    upstream: FakeUpstream,
    gateway: TestGateway,
    _db: ctxgc_store::testing::TestDb,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let (upstream, gateway, db) = runtime.block_on(async {
            let upstream = FakeUpstream::start().await;
            let (db, store) = sqlite_store();
            let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
            (upstream, gateway, db)
        });
        Env {
            runtime,
            upstream,
            gateway,
            _db: db,
        }
    })
}

/// Posts a body; returns the status and the body text.
fn post(path: &str, body: Vec<u8>, session: Option<&str>) -> (u16, String) {
    let env = env();
    env.runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(format!("{}{path}", env.gateway.base))
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = session {
            request = request.header("x-ctxgc-session", s);
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    })
}

/// The gateway still compiles and forwards a plain request, and its answer is this request's.
fn assert_healthy() {
    let marker = format!("still-serving-{}", env().upstream.requests().len());
    let body = json!({"model": "fake-model", "messages": [{"role": "user", "content": marker}]});
    let (status, text) = post("/v1/chat/completions", body.to_string().into_bytes(), None);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&marker), "{text}");
}

/// What the gateway may answer a fuzzed body with: the provider's answer, or a 400 whose
/// JSON error says what is wrong. Never a 500.
fn assert_answered(status: u16, text: &str) {
    match status {
        200 => {}
        400 => {
            let error: Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("a 400 that is not JSON ({e}): {text}"));
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(message.starts_with("ctxgc gateway: "), "{text}");
        }
        other => panic!("status {other}: {text}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(32),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn parse_mutated_bodies(seed in 0usize..16, ms in mutations()) {
        let (_, format, body) = &seeds()[seed % seeds().len()];
        let bytes = mutated(body, &ms);
        for f in [*format, Format::OpenaiChat, Format::Anthropic, Format::Responses] {
            parse_case(&bytes, f);
        }
    }

    #[test]
    fn parse_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut body = b"{\"messages\": [".to_vec();
        body.extend_from_slice(&bytes);
        for f in [Format::OpenaiChat, Format::Anthropic, Format::Responses] {
            parse_case(&bytes, f);
            parse_case(&body, f);
        }
    }

    /// Upstream answers, streamed or not, mutated and cut into arbitrary chunks.
    #[test]
    fn usage_reader_on_mutated_answers(ms in mutations(), chunk in 1usize..64, stream in any::<bool>()) {
        let answer = if stream {
            "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
             data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n\
             data: [DONE]\n\n".to_owned()
        } else {
            json!({"id": "msg_1", "type": "message", "content": [{"type": "text", "text": "hi"}],
                "usage": {"input_tokens": 12, "cache_read_input_tokens": 4, "output_tokens": 3}}).to_string()
        };
        let bytes = mutated(&answer, &ms);
        let mut reader = UsageReader::new(stream);
        for piece in bytes.chunks(chunk) {
            reader.feed(piece);
        }
        let _ = reader.finish();
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(32).div_ceil(4),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whole requests through the gateway: answered or refused clearly, never a 500.
    #[test]
    fn gateway_answers_mutated_requests(seed in 0usize..16, ms in mutations(), named in any::<bool>()) {
        let (path, _, body) = &seeds()[seed % seeds().len()];
        let bytes = mutated(body, &ms);
        let session = named.then_some("fuzz-session");
        let (status, text) = post(path, bytes, session);
        assert_answered(status, &text);
        assert_healthy();
    }
}

#[test]
fn deep_nesting_and_huge_strings_through_the_gateway() {
    for depth in [10_000, 100_000] {
        let arrays = nested_arrays(depth, "1");
        let objects = nested_objects(depth, "1");
        let as_string = |s: &str| Value::String(s.to_owned()).to_string();
        let bodies = [
            arrays.clone(),
            format!("{{\"model\": \"fake-model\", \"messages\": {arrays}}}"),
            format!(
                "{{\"model\": \"fake-model\", \"messages\": [{{\"role\": \"user\", \"content\": {objects}}}]}}"
            ),
            format!(
                "{{\"model\": \"fake-model\", \"messages\": [{{\"role\": \"user\", \"content\": {}}}]}}",
                as_string(&objects)
            ),
            format!(
                "{{\"model\": \"fake-model\", \"messages\": [{{\"role\": \"user\", \"content\": \"go\"}}, \
                 {{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{{\"id\": \"c1\", \"type\": \"function\", \
                 \"function\": {{\"name\": \"f\", \"arguments\": {}}}}}]}}, \
                 {{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": {}}}]}}",
                as_string(&arrays),
                as_string(&arrays)
            ),
            format!("{{\"model\": \"fake-model\", \"stream\": {arrays}, \"messages\": []}}"),
        ];
        for (i, body) in bodies.iter().enumerate() {
            for f in [Format::OpenaiChat, Format::Anthropic, Format::Responses] {
                parse_case(body.as_bytes(), f);
            }
            let (status, text) = post("/v1/chat/completions", body.clone().into_bytes(), None);
            eprintln!("depth {depth}, body {i}: {status}");
            assert_answered(status, &text);
            let (status, text) = post("/v1/messages", body.clone().into_bytes(), None);
            assert_answered(status, &text);
        }
    }
    let big = "y".repeat(4 << 20);
    let digits = "7".repeat(100_000);
    for body in [
        format!(
            "{{\"model\": \"fake-model\", \"messages\": [{{\"role\": \"user\", \"content\": \"{big}\"}}]}}"
        ),
        format!(
            "{{\"model\": \"fake-model\", \"temperature\": {digits}, \"messages\": [{{\"role\": \"user\", \"content\": {digits}}}]}}"
        ),
        format!(
            "{{\"model\": \"{big}\", \"messages\": [{{\"role\": \"user\", \"content\": \"x\"}}]}}"
        ),
    ] {
        let (status, text) = post("/v1/chat/completions", body.into_bytes(), None);
        assert_answered(status, &text);
    }
    assert_healthy();
}

#[test]
fn invalid_utf8_is_refused_with_its_offset() {
    let (status, text) = post(
        "/v1/chat/completions",
        b"{\"model\": \"fake-model\", \"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}"
            .to_vec(),
        None,
    );
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("not valid UTF-8 (at byte 66)"), "{text}");
    assert_healthy();
}

//! Conversations over many requests: a real agent transcript from the corpus replayed turn by
//! turn, as an agent resends its history. Every upstream body equals what a stateless
//! cache-stable compile of the same request gives, byte for byte; between compaction steps
//! each upstream request is a byte-identical prefix of the next; all but the first request
//! take the incremental path; receipts come back from the store. Two gateways on one
//! PostgreSQL serve one conversation in turns.

mod common;

use common::*;
use ctxgc_core::Options;
use ctxgc_gateway::GatewayOptions;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

const RECORD: (&str, &str) = (
    "tau2-bench-fork-grok.jsonl",
    "tau2-bench-fork/4d9c488b-3d18-4f5c-a59c-8573f2792983",
);

/// The messages of the corpus conversation, or `None` (with a note) without the corpus.
fn transcript() -> Option<Vec<Box<RawValue>>> {
    let Some(dir) = corpus() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); session replay skipped");
        return None;
    };
    let text = std::fs::read_to_string(dir.join(RECORD.0)).expect("corpus file reads");
    #[derive(Deserialize)]
    struct Record {
        id: String,
        messages: Vec<Box<RawValue>>,
    }
    let record = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Record>(l).ok())
        .find(|r| r.id == RECORD.1)
        .expect("the record is in the corpus");
    Some(record.messages)
}

/// The requests an agent sends: the history up to each assistant turn.
fn requests(messages: &[Box<RawValue>]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, m) in messages.iter().enumerate() {
        let role: Value = serde_json::from_str(m.get()).unwrap();
        if k > 0 && role["role"] == "assistant" {
            let list: Vec<&str> = messages[..k].iter().map(|m| m.get()).collect();
            out.push(format!(
                "{{\"model\":\"fake-model\",\"messages\":[{}],\"temperature\":0}}",
                list.join(",")
            ));
        }
    }
    out
}

fn upstream_messages(body: &[u8]) -> Vec<String> {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        messages: Vec<&'a RawValue>,
    }
    let b: Body = serde_json::from_slice(body).unwrap();
    b.messages.iter().map(|m| m.get().to_owned()).collect()
}

fn stateless(options: &GatewayOptions, body: &str) -> (String, usize) {
    let compiled = ctxgc_core::compile(
        body,
        &Options {
            chat: options.chat_options(),
            ..Options::default()
        },
    )
    .unwrap();
    let steps = compiled
        .chat
        .as_ref()
        .and_then(|c| c.compaction_steps.as_ref())
        .map_or(0, Vec::len);
    (compiled.output, steps)
}

async fn post(base: &str, body: &str, session: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-session-test")
        .body(body.to_owned());
    if let Some(s) = session {
        request = request.header("x-ctxgc-session", s);
    }
    let r = request.send().await.unwrap();
    assert_eq!(r.status(), 200);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_is_compiled_incrementally_with_stable_prefixes() {
    let Some(messages) = transcript() else {
        return;
    };
    let bodies = requests(&messages);
    assert!(bodies.len() > 20, "{} requests", bodies.len());
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let options = options_for(&upstream.base);
    let gateway = TestGateway::start(options.clone(), Some(store)).await;

    let mut previous: Option<(Vec<String>, usize)> = None;
    let mut prefix_kept = 0;
    for body in &bodies {
        // No session header: the conversation is recognised by its stable prefix.
        let r = post(&gateway.base, body, None).await;
        r.bytes().await.unwrap();
        let sent = upstream.last().body;
        let (expected, steps) = stateless(&options, body);
        assert_eq!(
            String::from_utf8_lossy(&sent),
            expected,
            "the incremental compile differs from a stateless one"
        );
        let now = upstream_messages(&sent);
        if let Some((before, before_steps)) = &previous
            && *before_steps == steps
        {
            assert!(
                now.len() >= before.len() && now[..before.len()] == before[..],
                "without a compaction step the earlier request must be a byte-identical prefix"
            );
            prefix_kept += 1;
        }
        previous = Some((now, steps));
    }
    assert!(
        prefix_kept * 2 > bodies.len(),
        "{prefix_kept} of {}",
        bodies.len()
    );
    let total = gateway.gateway.metrics().total();
    assert_eq!(total.requests as usize, bodies.len());
    // The agent speaks first: its first request has no user message yet, so the prefix that
    // names the conversation (system prompt to first user message) is complete from the
    // second request on; every request after that went incremental.
    assert_eq!(total.incremental as usize, bodies.len() - 2);
    assert!(total.bytes_out < total.bytes_in, "{total:?}");

    // Every original is in the store, under the id the compiler gave it.
    let sessions = gateway.gateway.sessions().unwrap().clone();
    let key = {
        let last = bodies.last().unwrap().clone();
        tokio::task::spawn_blocking(move || {
            let ctxgc_gateway::request::Parsed::Conversation(c) =
                ctxgc_gateway::request::parse(last.as_bytes(), ctxgc_core::Format::OpenaiChat)
                    .unwrap()
            else {
                panic!("a conversation")
            };
            c.prefix_key()
        })
        .await
        .unwrap()
    };
    // The conversation is scoped by the credentials it came with.
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("authorization", "Bearer sk-session-test".parse().unwrap());
    let tenant = sessions.tenant_of(&headers, None).unwrap();
    assert!(tenant.is_some());
    let key = ctxgc_gateway::sessions::scoped_key(&key, tenant.as_deref());
    let original = messages[3].get().to_owned();
    let got = tokio::task::spawn_blocking(move || sessions.receipt(&key, "m3"))
        .await
        .unwrap()
        .unwrap()
        .expect("message m3 is stored");
    assert_eq!(String::from_utf8(got).unwrap(), original);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_history_starts_over_and_stays_correct() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let options = options_for(&upstream.base);
    let gateway = TestGateway::start(options.clone(), Some(store)).await;
    let first = r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}"#;
    let edited = r#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"a"},{"role":"assistant","content":"B, edited"},{"role":"user","content":"c"}]}"#;
    for body in [first, edited, first] {
        post(&gateway.base, body, Some("edit-1"))
            .await
            .bytes()
            .await
            .unwrap();
        let sent = upstream.last().body;
        assert_eq!(String::from_utf8_lossy(&sent), stateless(&options, body).0);
    }
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_postgresql_serve_one_session() {
    let Some(messages) = transcript() else {
        return;
    };
    let opened = tokio::task::spawn_blocking(|| {
        let db = ctxgc_store::testing::postgres()?;
        let a = db.open().map_err(|e| e.to_string())?;
        let b = db.open().map_err(|e| e.to_string())?;
        Ok::<_, String>((db, a, b))
    })
    .await
    .unwrap();
    let (db, store_a, store_b) = match opened {
        Ok(x) => x,
        Err(why) if ctxgc_store::testing::services_required() => {
            panic!("PostgreSQL is required under CI and does not answer: {why}")
        }
        Err(why) => {
            eprintln!("note: PostgreSQL test skipped ({why})");
            return;
        }
    };
    let upstream = FakeUpstream::start().await;
    let options = options_for(&upstream.base);
    let a = TestGateway::start(options.clone(), Some(store_a)).await;
    let b = TestGateway::start(options.clone(), Some(store_b)).await;
    let bodies = requests(&messages);
    let bodies = &bodies[..bodies.len().min(24)];
    for (n, body) in bodies.iter().enumerate() {
        // Turns alternate between the two, in runs of three.
        let gateway = if (n / 3) % 2 == 0 { &a } else { &b };
        post(&gateway.base, body, Some("shared-session"))
            .await
            .bytes()
            .await
            .unwrap();
        let sent = upstream.last().body;
        assert_eq!(
            String::from_utf8_lossy(&sent),
            stateless(&options, body).0,
            "request {n}"
        );
    }
    // Both compiled from the shared store: every request after the first went incremental
    // (a gateway that was behind caught up from the store first).
    let (ta, tb) = (a.gateway.metrics().total(), b.gateway.metrics().total());
    assert_eq!((ta.incremental + tb.incremental) as usize, bodies.len() - 1);
    assert!(ta.requests > 0 && tb.requests > 0);
    a.stop().await;
    b.stop().await;
    tokio::task::spawn_blocking(move || drop(db)).await.unwrap();
}

/// A deterministic agent session that makes compaction steps worth it: lookups repeated with
/// the same or changed results, bulky JSON lists, long logs, state declarations (so the
/// register changes at steps). Messages in OpenAI Chat form.
fn stepping_session(seed: u64, turns: usize) -> Vec<Value> {
    use serde_json::json;
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n.max(1)
    };
    let mut messages =
        vec![json!({"role": "system", "content": "You are a support agent. Follow the policy."})];
    for t in 0..turns {
        messages.push(
            json!({"role": "user", "content": format!("Request {t}: check order {}", next(4))}),
        );
        let tool = ["get_order", "list_flights", "read_log"][next(3) as usize];
        let arg = next(3);
        let id = format!("call_{t}");
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": tool, "arguments": json!({"id": arg}).to_string()}}]}));
        let version = next(2);
        let output = match tool {
            "list_flights" => json!({"flights": (0..40).map(|r| json!({
                "flight": format!("HAT{r:03}"), "price": 100 + r * 7 + version, "seats": r % 9,
                "status": "available", "aircraft": "A320"})).collect::<Vec<_>>()}).to_string(),
            "read_log" => (0..200).map(|l| format!("line {l}: ok v{version}\n")).collect(),
            _ => json!({"order": arg, "status": if version == 0 { "pending" } else { "shipped" }, "items": [
                {"sku": "A1", "qty": 1}, {"sku": "B2", "qty": 2}]}).to_string(),
        };
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        let state = if next(3) == 0 {
            format!(
                "<contextgc-state>{{\"assert\": {{\"order\": \"{}\"}}}}</contextgc-state>",
                next(4)
            )
        } else {
            String::new()
        };
        messages.push(json!({"role": "assistant", "content": format!("Checked ({t}).{state}")}));
    }
    messages
}

/// The same session as an Anthropic Messages body's `system` and `messages`.
fn as_anthropic(messages: &[Value]) -> (Value, Vec<Value>) {
    use serde_json::json;
    let system = messages[0]["content"].clone();
    let mut out = Vec::new();
    for m in &messages[1..] {
        let converted = match (m["role"].as_str(), m.get("tool_calls")) {
            (Some("assistant"), Some(calls)) => {
                let call = &calls[0];
                let input: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                json!({"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": input}]})
            }
            (Some("tool"), _) => json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": m["tool_call_id"], "content": m["content"]}]}),
            _ => m.clone(),
        };
        out.push(converted);
    }
    (system, out)
}

/// Replays a session through the gateway as an agent does (the whole history before each
/// assistant turn) and checks every upstream body against a stateless compile. Returns the
/// compaction steps of the last request.
async fn replay_stepping(path: &str, bodies: &[(String, Option<ctxgc_core::Format>)]) -> usize {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let options = options_for(&upstream.base);
    let gateway = TestGateway::start(options.clone(), Some(store)).await;
    let http = reqwest::Client::new();
    let mut steps = 0;
    let mut steps_seen = Vec::new();
    for (n, (body, from)) in bodies.iter().enumerate() {
        let r = http
            .post(format!("{}{path}", gateway.base))
            .header("content-type", "application/json")
            .header("x-api-key", "sk-ant-test")
            .header("anthropic-version", "2023-06-01")
            .header("x-ctxgc-session", "stepping")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
        let sent = upstream.last().body;
        let compiled = ctxgc_core::compile(
            body,
            &Options {
                chat: options.chat_options(),
                from: *from,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&sent),
            compiled.output,
            "request {n}: the spliced body differs from a stateless compile"
        );
        steps = compiled
            .chat
            .as_ref()
            .and_then(|c| c.compaction_steps.as_ref())
            .map_or(0, Vec::len);
        steps_seen.push(steps);
    }
    let total = gateway.gateway.metrics().total();
    assert_eq!(total.incremental as usize, bodies.len() - 1);
    // Requests went on being compiled incrementally through the steps: some requests were
    // made between two steps, and after the last one.
    assert!(
        steps_seen
            .windows(2)
            .filter(|w| w[0] == w[1] && w[0] > 0)
            .count()
            > 2,
        "{steps_seen:?}"
    );
    gateway.stop().await;
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kept_rendering_is_spliced_across_compaction_steps() {
    let messages = stepping_session(7, 60);
    // OpenAI Chat: the history before each assistant turn.
    let mut chat = Vec::new();
    for k in 2..messages.len() {
        if messages[k]["role"] == "assistant" {
            let body = serde_json::json!({"model": "fake-model", "messages": messages[..k],
                "temperature": 0});
            chat.push((body.to_string(), None));
        }
    }
    let steps = replay_stepping("/v1/chat/completions", &chat).await;
    assert!(steps >= 2, "{steps} compaction steps");

    let (system, anthropic) = as_anthropic(&messages);
    let mut bodies = Vec::new();
    for k in 1..anthropic.len() {
        if anthropic[k]["role"] == "assistant" {
            let body = serde_json::json!({"model": "fake-model", "max_tokens": 64,
                "system": system, "messages": anthropic[..k]});
            bodies.push((body.to_string(), Some(ctxgc_core::Format::Anthropic)));
        }
    }
    let steps = replay_stepping("/v1/messages", &bodies).await;
    assert!(steps >= 2, "{steps} compaction steps");
}

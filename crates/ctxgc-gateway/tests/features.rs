//! Recall round trips, Anthropic cache breakpoints and the metrics endpoint, over real HTTP.

mod common;

use common::*;
use serde_json::{Value, json};

fn read_call(id: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}}]})
}

fn conversation(model: &str, file: &str) -> Value {
    json!({"model": model, "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Look at src/lib.rs."},
        read_call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": file},
        // The agent has read the file whole; only then may it be folded.
        {"role": "assistant", "content": "src/lib.rs defines 400 items."},
        {"role": "user", "content": "What does line 100 say?"}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_is_answered_from_the_store_and_the_client_sees_a_normal_answer() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.recall = true;
    let gateway = TestGateway::start(options, Some(store)).await;
    let http = reqwest::Client::new();
    let file: String = (0..400)
        .map(|i| format!("line {i}: fn item_{i}() {{}}\n"))
        .collect();

    // First request: the long read, answered already, is folded, and the fold names its
    // receipt.
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&conversation("fake-model", &file))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let sent = upstream.last().json();
    let tools = sent["tools"]
        .as_array()
        .expect("the recall tool is offered");
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "ctxgc_recall")
    );
    let stub = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.contains("call ctxgc_recall with id"))
        .expect("a stub that names its receipt")
        .to_owned();
    let id = stub
        .split("call ctxgc_recall with id \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();

    // Second request, same conversation: the model calls the tool, the gateway answers it
    // from the store and sends the request on; the client gets the final answer only.
    let before = upstream.requests().len();
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&conversation(&format!("recall:{id}"), &file))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(text, format!("recalled: {file}"));
    assert!(answer["choices"][0]["message"]["tool_calls"].is_null());
    let rounds = &upstream.requests()[before..];
    assert_eq!(rounds.len(), 2);
    let continued = rounds[1].json();
    let msgs = continued["messages"].as_array().unwrap();
    let n = msgs.len();
    assert_eq!(
        msgs[n - 2]["tool_calls"][0]["function"]["name"],
        "ctxgc_recall"
    );
    assert_eq!(msgs[n - 1]["role"], "tool");
    assert_eq!(msgs[n - 1]["content"], file);

    // An id the conversation does not have is said so, not invented.
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&conversation("recall:m999", &file))
        .send()
        .await
        .unwrap();
    let answer: Value = r.json().await.unwrap();
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    // ... with the ids it may have meant.
    assert_eq!(
        text,
        "recalled: no item with id \"m999\" in this conversation; the shortened items nearest to it are \"m3\""
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_recall_an_answered_read_goes_upstream_whole() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
    let file: String = (0..400).map(|i| format!("line {i}\n")).collect();
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&conversation("fake-model", &file))
        .send()
        .await
        .unwrap();
    // Without a recall channel the default preset hides nothing nobody could get back: the
    // answered read goes upstream whole, and no stub names a tool the model does not have.
    let sent = String::from_utf8(upstream.last().body).unwrap();
    assert!(!sent.contains("ctxgc_recall"), "{sent}");
    assert!(!sent.contains("lines omitted"), "{sent}");
    let body: Value = serde_json::from_str(&sent).unwrap();
    assert_eq!(body["messages"][3]["content"], Value::String(file));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_breakpoints_and_metrics() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.cache_breakpoints = true;
    let gateway = TestGateway::start(options, Some(store)).await;
    let http = reqwest::Client::new();
    let body = json!({"model": "fake-model", "max_tokens": 16,
    "system": [{"type": "text", "text": "Policy.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]}
    ]});
    for _ in 0..2 {
        let r = http
            .post(format!("{}/v1/messages", gateway.base))
            .header("x-ctxgc-session", "bp-1")
            .header("x-api-key", "sk-ant-x")
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let sent = upstream.last().json();
    // The client's marker on the system prompt is kept; one more goes on the last block.
    assert_eq!(sent["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(
        sent["messages"][2]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert!(sent["messages"][0].get("cache_control").is_none());
    assert_eq!(sent.to_string().matches("cache_control").count(), 2);

    let metrics = http
        .get(format!("{}/metrics", gateway.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
            .to_owned()
    };
    // Per conversation: its name and the keyed hash of its credentials (never the key).
    let requests = line("ctxgc_gateway_requests_total{session=\"bp-1\",tenant=\"");
    assert!(requests.ends_with("\"} 2"), "{requests}");
    assert!(!metrics.contains("sk-ant-x"));
    assert_eq!(
        line("ctxgc_gateway_cache_write_tokens_total "),
        "ctxgc_gateway_cache_write_tokens_total 22"
    );
    let read: u64 = line("ctxgc_gateway_cache_read_tokens_total{session=\"bp-1\",")
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(read > 0);
    assert!(metrics.contains("ctxgc_gateway_responses_total{code=\"200\"} 2"));
}

/// The data of each event of a server-sent-event stream, with its event name.
fn events(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .map(str::to_owned);
            let data = e
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("")
                .to_owned();
            (name, data)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_in_a_streamed_answer_continues_in_the_same_stream() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.recall = true;
    let gateway = TestGateway::start(options, Some(store)).await;
    let http = reqwest::Client::new();
    let file: String = (0..400)
        .map(|i| format!("line {i}: fn item_{i}() {{}}\n"))
        .collect();

    // OpenAI Chat. The first request finds the stub's receipt id.
    let chat = |model: &str, stream: bool| {
        let mut body = conversation(model, &file);
        body["stream"] = json!(stream);
        body
    };
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&chat("fake-model", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = stub_id(&upstream.last().json());
    let before = upstream.requests().len();
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&chat(&format!("recall:{id}"), true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = r.text().await.unwrap();
    let chunks = events(&text);
    assert_eq!(chunks.last().unwrap().1, "[DONE]");
    assert_eq!(chunks.iter().filter(|(_, d)| d == "[DONE]").count(), 1);
    let mut content = String::new();
    for (_, data) in &chunks[..chunks.len() - 1] {
        let chunk: Value = serde_json::from_str(data).unwrap();
        if let Some(delta) = chunk.pointer("/choices/0/delta") {
            assert!(delta.get("tool_calls").is_none(), "{text}");
            content.push_str(delta["content"].as_str().unwrap_or(""));
        }
    }
    assert_eq!(content, format!("Let me check.recalled: {file}"));
    let rounds = &upstream.requests()[before..];
    assert_eq!(rounds.len(), 2);
    let continued = rounds[1].json();
    assert_eq!(continued["stream"], true);
    let msgs = continued["messages"].as_array().unwrap();
    let n = msgs.len();
    assert_eq!(msgs[n - 2]["content"], "Let me check.");
    assert_eq!(
        msgs[n - 2]["tool_calls"][0]["function"]["name"],
        "ctxgc_recall"
    );
    assert_eq!(
        msgs[n - 2]["tool_calls"][0]["function"]["arguments"],
        json!({"id": id}).to_string()
    );
    assert_eq!(msgs[n - 1]["role"], "tool");
    assert_eq!(msgs[n - 1]["content"], file);

    // Anthropic Messages.
    let messages = |model: &str, stream: bool| {
        json!({"model": model, "max_tokens": 64, "stream": stream,
        "system": "You are a coding agent.",
        "messages": [
            {"role": "user", "content": "Look at src/lib.rs."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                "name": "read_file", "input": {"path": "src/lib.rs"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                "content": file}]},
            {"role": "assistant", "content": "I have read it."},
            {"role": "user", "content": "What does line 100 say?"}
        ]})
    };
    let post = |body: Value| {
        http.post(format!("{}/v1/messages", gateway.base))
            .header("x-api-key", "sk-ant-x")
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
    };
    let r = post(messages("fake-model", false)).await.unwrap();
    assert_eq!(r.status(), 200);
    let id = stub_id(&upstream.last().json());
    let before = upstream.requests().len();
    let r = post(messages(&format!("recall:{id}"), true)).await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let evs = events(&text);
    let named = |name: &str| {
        evs.iter()
            .filter(|(n, _)| n.as_deref() == Some(name))
            .count()
    };
    assert_eq!(named("message_start"), 1, "{text}");
    assert_eq!(named("message_stop"), 1, "{text}");
    assert_eq!(evs.last().unwrap().0.as_deref(), Some("message_stop"));
    let mut blocks: Vec<String> = Vec::new();
    for (name, data) in &evs {
        let v: Value = serde_json::from_str(data).unwrap();
        match name.as_deref() {
            Some("content_block_start") => {
                assert_eq!(v["content_block"]["type"], "text", "{text}");
                assert_eq!(v["index"], blocks.len(), "blocks numbered in order");
                blocks.push(String::new());
            }
            Some("content_block_delta") => {
                let i = v["index"].as_u64().unwrap() as usize;
                blocks[i].push_str(v["delta"]["text"].as_str().unwrap());
            }
            Some("message_delta") => assert_eq!(v["delta"]["stop_reason"], "end_turn"),
            _ => {}
        }
    }
    assert_eq!(
        blocks,
        ["Let me check.".to_owned(), format!("recalled: {file}")]
    );
    let rounds = &upstream.requests()[before..];
    assert_eq!(rounds.len(), 2);
    let continued = rounds[1].json();
    let msgs = continued["messages"].as_array().unwrap();
    let n = msgs.len();
    assert_eq!(
        msgs[n - 2]["content"],
        json!([{"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_r1", "name": "ctxgc_recall", "input": {"id": id}}])
    );
    assert_eq!(msgs[n - 1]["content"][0]["tool_use_id"], "toolu_r1");
    assert_eq!(msgs[n - 1]["content"][0]["content"], file);
    gateway.stop().await;
}

/// A long coding session: twenty reads of different files, each answered.
fn long_session(model: &str) -> (Value, Vec<String>) {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    let mut files = Vec::new();
    for k in 0..20 {
        let file: String = (0..120)
            .map(|i| format!("line {i}: pub fn handler_{k}_{i}(request: &Request) -> Response {{ Response::ok() }}\n"))
            .collect();
        messages.push(json!({"role": "user", "content": format!("Look at src/mod_{k}.rs.")}));
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{k}"),
            "type": "function", "function": {"name": "read_file",
            "arguments": json!({"path": format!("src/mod_{k}.rs")}).to_string()}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{k}"), "content": file}));
        messages.push(
            json!({"role": "assistant", "content": format!("src/mod_{k}.rs has 120 handlers.")}),
        );
        files.push(file);
    }
    messages.push(json!({"role": "user", "content": "Which handler in mod_0 takes a Request?"}));
    (json!({"model": model, "messages": messages}), files)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_recall_old_outputs_of_a_long_session_are_masked_and_recalled_whole() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.recall = true;
    let gateway = TestGateway::start(options, Some(store)).await;
    let http = reqwest::Client::new();

    let (body, files) = long_session("fake-model");
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let sent = upstream.last().json();
    let contents: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(contents.len(), files.len());
    let masked: Vec<&str> = contents
        .iter()
        .copied()
        .filter(|c| c.starts_with("[ctxgc: output masked; call ctxgc_recall with id \""))
        .collect();
    assert!(masked.len() >= 10, "{} of 20 outputs masked", masked.len());
    // The latest read is sent whole.
    assert_eq!(contents.last().copied(), files.last().map(String::as_str));
    let id = masked[0]
        .split("with id \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();

    // The model recalls the first masked read: the gateway answers it with the original.
    let (body, _) = long_session(&format!("recall:{id}"));
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    let text = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(text, format!("recalled: {}", files[0]));
    gateway.stop().await;
}

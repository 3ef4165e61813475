//! The official `openai` and `anthropic` Python SDKs as the agent: pointed at the gateway by
//! their base URL only, every call shape works (Chat Completions, Responses, Messages;
//! streamed and not; a 429 with its retry-after; a 500), and the fake provider receives the
//! conversations compiled, with the client's own credentials.

mod common;

use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// The interpreter with both SDKs: `CTXGC_TEST_PYTHON`, else the repository's `.venv`;
/// without either the test is skipped with a note, except under CI.
fn python() -> Option<PathBuf> {
    let from_env = std::env::var_os("CTXGC_TEST_PYTHON").map(PathBuf::from);
    let repo_venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    match from_env.or_else(|| repo_venv.is_file().then_some(repo_venv)) {
        Some(python) => Some(python),
        None if std::env::var_os("CI").is_some()
            || std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some() =>
        {
            panic!("no Python with the openai and anthropic SDKs: set CTXGC_TEST_PYTHON")
        }
        None => {
            eprintln!(
                "note: Python SDK test skipped: set CTXGC_TEST_PYTHON to a venv with openai and anthropic"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_work_through_the_gateway() {
    let Some(python) = python() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_clients.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&gateway.base)
        .output()
        .await
        .expect("the SDK clients run");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "SDK clients failed:\n{stderr}");
    let out: Value = serde_json::from_slice(&run.stdout).expect("a JSON report");

    // Every call got its own answer, whole.
    assert_eq!(out["chat"], "echo: chat-plain");
    assert_eq!(out["chat_stream"], "echo: chat-stream");
    assert!(out["chat_stream_usage"].as_u64().unwrap() > 0);
    assert_eq!(out["responses"], "echo: responses-plain");
    assert_eq!(out["responses_stream"], "echo: responses-stream");
    let kinds = out["responses_stream_events"].as_array().unwrap();
    assert_eq!(kinds.first().unwrap(), "response.created");
    assert_eq!(kinds.last().unwrap(), "response.completed");
    assert_eq!(out["messages"], "echo: messages-plain");
    assert_eq!(out["messages_stream"], "echo: messages-stream");
    assert_eq!(out["messages_stream_final"], "echo: messages-stream");
    assert_eq!(out["messages_stream_usage"][1], 7);
    let raw = out["messages_raw_events"].as_array().unwrap();
    assert_eq!(raw.first().unwrap(), "message_start");
    assert_eq!(raw.last().unwrap(), "message_stop");
    // Faults come back as they came.
    assert_eq!(out["rate_limited"]["status"], 429);
    assert_eq!(out["rate_limited"]["retry_after"], "17");
    assert_eq!(out["server_error"]["status"], 500);
    // Other paths are forwarded.
    assert_eq!(out["models"], serde_json::json!(["fake-model"]));

    // What the provider received.
    let received = upstream.requests();
    let chat = received
        .iter()
        .find(|r| {
            r.path == "/v1/chat/completions"
                && String::from_utf8_lossy(&r.body).contains("chat-plain")
        })
        .expect("the chat request arrived");
    assert_eq!(
        chat.header("authorization"),
        Some("Bearer sk-test-openai-3f9c")
    );
    let body = chat.json();
    let tool = body["messages"][3]["content"].as_str().unwrap();
    // The pretty-printed tool output went compiled: no indentation left, every flight kept.
    assert!(!tool.contains("\n    "), "{tool}");
    for i in 0..12 {
        assert!(tool.contains(&format!("HAT{}", 100 + i)), "{tool}");
    }
    assert_eq!(body["model"], "fake-model");

    let messages = received
        .iter()
        .find(|r| {
            r.path == "/v1/messages" && String::from_utf8_lossy(&r.body).contains("messages-plain")
        })
        .expect("the messages request arrived");
    assert_eq!(messages.header("x-api-key"), Some("sk-ant-test-77ab"));
    assert!(messages.header("anthropic-version").is_some());
    let body = messages.json();
    assert_eq!(body["system"], "You are a travel agent.", "{body}");
    let result = body["messages"][2]["content"][0]["content"].to_string();
    assert!(!result.contains("\\n    "), "{result}");
    // The gateway's own headers never reach the provider.
    for r in &received {
        assert!(r.header("x-ctxgc-session").is_none());
        assert!(r.header("x-ctxgc-token").is_none());
    }

    // Usage from the provider's own fields, per request and in total.
    let total = gateway.gateway.metrics().total();
    assert!(total.requests >= 9, "{total:?}");
    assert!(total.usage.cache_read_tokens > 0, "{total:?}");
    assert!(total.usage.cache_write_tokens >= 11, "{total:?}");
    assert!(total.bytes_out < total.bytes_in, "{total:?}");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_read_one_stream_through_a_recall() {
    let Some(python) = python() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.recall = true;
    let gateway = TestGateway::start(options, Some(store)).await;
    let file: String = (0..400)
        .map(|i| format!("line {i}: fn item_{i}() {{}}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file_path = dir.path().join("lib.rs.txt");
    std::fs::write(&file_path, &file).unwrap();

    // The receipt ids the stubs name, from the same conversations sent once not streamed.
    let http = reqwest::Client::new();
    let chat = serde_json::json!({"model": "fake-model", "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Look at src/lib.rs."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": file},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": "What does line 100 say?"}]});
    // With the SDK's credentials: a conversation belongs to its tenant.
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .bearer_auth("sk-test-openai-3f9c")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let chat_id = stub_id(&upstream.last().json());
    let messages = serde_json::json!({"model": "fake-model", "max_tokens": 64,
        "system": "You are a coding agent.", "messages": [
        {"role": "user", "content": "Look at src/lib.rs."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file",
            "input": {"path": "src/lib.rs"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": file}]},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": "What does line 100 say?"}]});
    let r = http
        .post(format!("{}/v1/messages", gateway.base))
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "sk-ant-test-77ab")
        .json(&messages)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let messages_id = stub_id(&upstream.last().json());
    let responses = serde_json::json!({"model": "fake-model", "input": [
        {"type": "message", "role": "user", "content": "Look at src/lib.rs."},
        {"type": "function_call", "call_id": "c1", "name": "read_file",
            "arguments": "{\"path\": \"src/lib.rs\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": file},
        {"type": "message", "role": "assistant", "content": "I have read it."},
        {"type": "message", "role": "user", "content": "What does line 100 say?"}]});
    let r = http
        .post(format!("{}/v1/responses", gateway.base))
        .bearer_auth("sk-test-openai-3f9c")
        .json(&responses)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let responses_id = stub_id(&upstream.last().json());

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_recall.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&gateway.base)
        .arg(&file_path)
        .arg(&chat_id)
        .arg(&messages_id)
        .arg(&responses_id)
        .output()
        .await
        .expect("the SDK clients run");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "SDK clients failed:\n{stderr}");
    let out: Value = serde_json::from_slice(&run.stdout).expect("a JSON report");
    let expected = format!("Let me check.recalled: {file}");
    assert_eq!(out["chat_text"], expected);
    assert_eq!(out["chat_tool_calls"], 0);
    assert_eq!(out["chat_final"], expected);
    assert_eq!(out["chat_final_tool_calls"], 0);
    assert_eq!(
        out["messages_final"],
        serde_json::json!([
            ["text", "Let me check."],
            ["text", format!("recalled: {file}")]
        ])
    );
    assert_eq!(out["messages_stop"], "end_turn");
    // Responses: one stream, the recall call never shown, sequence numbers in order, and the
    // final response listing every message the client was shown.
    assert_eq!(out["responses_text"], expected);
    let kinds: Vec<&str> = out["responses_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert_eq!(
        kinds.iter().filter(|k| **k == "response.created").count(),
        1
    );
    assert!(!kinds.contains(&"item:function_call"), "{kinds:?}");
    let sequence: Vec<u64> = out["responses_sequence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        sequence.windows(2).all(|w| w[1] == w[0] + 1),
        "{sequence:?}"
    );
    assert_eq!(
        out["responses_final"],
        serde_json::json!(["Let me check.", format!("recalled: {file}")])
    );
    // Each streamed call took two rounds upstream.
    let recalled = upstream
        .requests()
        .iter()
        .filter(|r| {
            let body = r.json();
            let last = body["messages"].as_array().and_then(|m| m.last()).cloned();
            last.is_some_and(|m| {
                m["tool_call_id"] == "call_r1" || m["content"][0]["tool_use_id"] == "toolu_r1"
            })
        })
        .count();
    assert_eq!(recalled, 3);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_tenants_never_meet() {
    use ctxgc_core::store::Store;
    let Some(python) = python() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.recall = true;
    let gateway = TestGateway::start(options, Some(store)).await;
    let file: String = (0..400)
        .map(|i| format!("line {i}: const ALICE_ONLY_{i}: u32 = {i};\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file_path = dir.path().join("lib.rs.txt");
    std::fs::write(&file_path, &file).unwrap();
    // Alice's long read, folded: the id its stub names.
    let read = serde_json::json!({"model": "fake-model", "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": file},
        {"role": "assistant", "content": "I have read it."},
        {"role": "user", "content": "What does line 100 say?"}]});
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .bearer_auth("sk-alice-0001")
        .json(&read)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = stub_id(&upstream.last().json());
    let sessions_before = gateway.gateway.metrics().total();

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_tenants.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(&gateway.base)
        .arg(&id)
        .arg(&file_path)
        .output()
        .await
        .expect("the SDK clients run");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "SDK clients failed:\n{stderr}");
    let out: Value = serde_json::from_slice(&run.stdout).expect("a JSON report");

    // Every answer is its own conversation's.
    for n in 0..4 {
        let answers = &out["openai_answers"][n];
        assert_eq!(answers[0], "echo: Hi");
        for round in 1..4 {
            assert_eq!(
                answers[round],
                format!("echo: Question {round} from tenant {n}?")
            );
        }
    }
    for n in 0..2 {
        assert_eq!(
            out["anthropic_answers"][n][2],
            format!("echo: Question 2 from tenant {n}?")
        );
        assert_eq!(
            out["pair_answers"][n][3],
            format!("echo: Conversation {n}, question 3?")
        );
    }
    assert_eq!(out["alice_recall"], format!("recalled: {file}"));
    let refused = format!(
        "recalled: no item with id \"{id}\" in this conversation (it has no shortened items)"
    );
    assert_eq!(out["bob_recall"], refused);
    assert_eq!(out["anthropic_bob_recall"], refused);

    // One store session per conversation: Alice's read and her recall (1), four OpenAI
    // tenants, two Anthropic ones, the pair of one key, Bob's two (OpenAI and Anthropic).
    let sessions = gateway.gateway.sessions().expect("a store");
    let names: Vec<String> = sessions
        .with_store(|s| s.sessions())
        .unwrap()
        .into_iter()
        .map(|i| i.context_id)
        .filter(|c| c.starts_with("gw-"))
        .collect();
    assert_eq!(names.len(), 1 + 4 + 2 + 2 + 2, "{names:?}");
    // Only each conversation's first request (and the pair's parting) was compiled whole:
    // 16 OpenAI tenant requests (4 whole), 6 Anthropic (2), 8 of the pair (2), 3 recalls
    // (Alice's continues her conversation; Bob's two open theirs).
    let total = gateway.gateway.metrics().total();
    let requests = total.requests - sessions_before.requests;
    let incremental = total.incremental - sessions_before.incremental;
    assert_eq!(requests, 16 + 6 + 8 + 3);
    assert_eq!(incremental, (16 - 4) + (6 - 2) + (8 - 2) + 1);
    gateway.stop().await;
}

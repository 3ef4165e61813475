//! The JSON API over real HTTP on loopback, on the bundled examples and the repository's
//! chat fixtures, with real SQLite and PostgreSQL stores.

mod common;

use common::{Server, fill, read, repo_file};
use ctxgc_console::{ConsoleOptions, StoreHandle};
use ctxgc_core::Options;
use ctxgc_core::store::{MemoryStore, content_hash};
use serde_json::Value;

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// Posts `body` to /api/compile with `query`; the status and the JSON answer.
fn post(server: &Server, query: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let url = server.url(&format!("/api/compile{query}"));
    server.runtime.block_on(async {
        let response = client().post(url).body(body).send().await.expect("answer");
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.expect("JSON answer"))
    })
}

fn get(server: &Server, path: &str) -> (u16, Value) {
    let url = server.url(path);
    server.runtime.block_on(async {
        let response = client().get(url).send().await.expect("answer");
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.expect("JSON answer"))
    })
}

fn problem(answer: &Value) -> (&str, &str) {
    (
        answer["error"]["problem"].as_str().unwrap_or_default(),
        answer["error"]["message"].as_str().unwrap_or_default(),
    )
}

fn plain() -> Server {
    Server::start(ConsoleOptions::default(), None)
}

/// Every receipt carries its exact original: its hash and size are the receipt's own.
fn assert_receipts_exact(view: &Value) {
    let receipts = view["receipts"].as_array().expect("receipts");
    assert!(!receipts.is_empty(), "something was retired or rewritten");
    for receipt in receipts {
        let original = receipt["original"].as_str().expect("original bytes");
        assert_eq!(
            receipt["hash"].as_str(),
            Some(content_hash(original.as_bytes()).as_str())
        );
        assert_eq!(receipt["bytes"].as_u64(), Some(original.len() as u64));
        assert!(receipt["reason"].is_string(), "{receipt}");
    }
}

#[test]
fn a_chat_compiles_with_decisions_receipts_register_and_tokens_per_preset() {
    let server = plain();
    let text = read("examples/support-session.json");
    let (status, view) = post(&server, "?preset=default", text.clone());
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["format"], "openai-chat");
    assert_eq!(view["preset"], "default");
    // The same report the library gives, item for item.
    let direct = ctxgc_core::compile(&text, &Options::default()).unwrap();
    assert_eq!(view["output"].as_str(), Some(direct.output.as_str()));
    assert_eq!(
        view["tokens_before"].as_u64(),
        Some(direct.tokens_before as u64)
    );
    assert_eq!(
        view["tokens_after"].as_u64(),
        Some(direct.tokens_after as u64)
    );
    assert!(direct.tokens_after < direct.tokens_before);
    let items = view["items"].as_array().unwrap();
    assert_eq!(items.len(), direct.decisions.len());
    for (item, decision) in items.iter().zip(&direct.decisions) {
        assert_eq!(item["id"].as_str(), Some(decision.id.as_str()));
        assert_eq!(
            item["reason"].as_str(),
            decision.reason.map(|r| r.code()),
            "{item}"
        );
        assert_eq!(item["by"].as_array().map_or(0, Vec::len), decision.by.len());
    }
    assert_receipts_exact(&view);
    // Every input message is shown with its original.
    assert!(items.iter().filter(|i| i["original"].is_string()).count() >= items.len() - 1);
    assert!(view["register"].is_array());
    let presets: Vec<(&str, u64)> = view["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["preset"].as_str().unwrap(),
                p["tokens_after"].as_u64().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = presets.iter().map(|p| p.0).collect();
    assert_eq!(
        names,
        ["lossless", "default", "aggressive", "cache-stable", "eager"]
    );
    let after = |name: &str| presets.iter().find(|p| p.0 == name).unwrap().1;
    assert_eq!(after("default"), direct.tokens_after as u64);
    assert_eq!(
        after("eager"),
        after("default"),
        "eager is the default passes at once"
    );
    assert!(after("aggressive") <= after("default"));
    assert!(after("default") <= after("lossless"));
}

#[test]
fn an_event_trace_compiles_byte_identically_every_time() {
    let server = plain();
    let text = read("examples/coding-session.jsonl");
    let url = server.url("/api/compile");
    let bodies: Vec<Vec<u8>> = (0..2)
        .map(|_| {
            server.runtime.block_on(async {
                let r = client().post(&url).body(text.clone()).send().await.unwrap();
                assert_eq!(r.status().as_u16(), 200);
                r.bytes().await.unwrap().to_vec()
            })
        })
        .collect();
    assert_eq!(bodies[0], bodies[1], "identical input, identical answer");
    let view: Value = serde_json::from_slice(&bodies[0]).unwrap();
    assert_eq!(view["format"], "events");
    let direct = ctxgc_core::compile(&text, &Options::default()).unwrap();
    assert_eq!(view["output"].as_str(), Some(direct.output.as_str()));
    assert_receipts_exact(&view);
    // Event traces compile the same under every preset: none are listed.
    assert_eq!(view["presets"].as_array().map(Vec::len), Some(0));
    // Every retired item names its reason; each id is an input item with its original.
    for item in view["items"].as_array().unwrap() {
        if item["action"] != "keep" {
            assert!(item["reason"].is_string(), "{item}");
        }
    }
}

#[test]
fn the_chat_fixtures_compile_in_their_own_formats() {
    let server = plain();
    for (file, format) in [
        (
            "crates/ctxgc-core/tests/fixtures/chat/anthropic_session.json",
            "anthropic",
        ),
        (
            "crates/ctxgc-core/tests/fixtures/chat/responses_session.json",
            "responses",
        ),
        (
            "crates/ctxgc-core/tests/fixtures/chat/airline_cabin_change.json",
            "openai-chat",
        ),
    ] {
        let (status, view) = post(&server, "?preset=lossless", read(file));
        assert_eq!(status, 200, "{file}: {view}");
        assert_eq!(view["format"], format, "{file}");
        assert_eq!(view["preset"], "lossless");
    }
    // Conversation records (JSONL): ids are `<record>#<item>`, originals found for them.
    let (status, view) = post(
        &server,
        "",
        read("crates/ctxgc-core/tests/fixtures/chat/corpus_samples.jsonl"),
    );
    assert_eq!(status, 200, "{view}");
    let items = view["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .all(|i| i["id"].as_str().unwrap().contains('#'))
    );
    assert!(items.iter().any(|i| i["original"].is_string()));
}

#[test]
fn every_reason_code_has_its_documentation() {
    let server = plain();
    let (status, passes) = get(&server, "/api/passes");
    assert_eq!(status, 200);
    let passes = passes.as_array().unwrap();
    assert_eq!(passes.len(), ctxgc_core::Reason::ALL.len());
    let superseded = passes
        .iter()
        .find(|p| p["code"] == "superseded-var")
        .unwrap();
    assert!(!superseded["summary"].as_str().unwrap().is_empty());
    assert!(superseded["doc"].as_str().unwrap().lines().count() > 2);
    assert!(!superseded["doc"].as_str().unwrap().contains("//!"));
}

#[test]
fn bad_uploads_get_a_clear_message_naming_the_problem() {
    let server = Server::start(
        ConsoleOptions {
            max_body_bytes: 4096,
            ..ConsoleOptions::default()
        },
        None,
    );
    let (status, answer) = post(&server, "", "{\"events\": [{\"id\": \"e1\",");
    assert_eq!(
        (status, problem(&answer).0),
        (400, "malformed-json"),
        "{answer}"
    );
    assert!(problem(&answer).1.contains("line 1"), "{answer}");

    let (status, answer) = post(&server, "", "{\"hello\": \"world\"}");
    assert_eq!(
        (status, problem(&answer).0),
        (422, "unknown-format"),
        "{answer}"
    );

    let (status, answer) = post(&server, "?from=xml", "[]");
    assert_eq!(
        (status, problem(&answer).0),
        (422, "unknown-format"),
        "{answer}"
    );
    assert!(problem(&answer).1.contains("from"), "{answer}");

    let big = read("examples/support-session.json");
    assert!(big.len() > 4096);
    let (status, answer) = post(&server, "", big);
    assert_eq!((status, problem(&answer).0), (413, "too-large"), "{answer}");
    assert!(problem(&answer).1.contains("4096"), "{answer}");

    let mut bad =
        b"[{\"id\": \"e1\", \"type\": \"set_var\", \"key\": \"k\", \"value\": \"".to_vec();
    let offset = bad.len();
    bad.extend_from_slice(&[0xff, 0xfe]);
    bad.extend_from_slice(b"\"}]");
    let (status, answer) = post(&server, "", bad);
    assert_eq!(
        (status, problem(&answer).0),
        (400, "invalid-utf8"),
        "{answer}"
    );
    assert!(
        problem(&answer).1.contains(&format!("offset {offset}")),
        "{answer}"
    );

    let (status, answer) = post(&server, "", "  \n");
    assert_eq!((status, problem(&answer).0), (400, "empty"), "{answer}");

    let (status, answer) = post(&server, "?preset=gentle", "[]");
    assert_eq!(
        (status, problem(&answer).0),
        (400, "unknown-preset"),
        "{answer}"
    );

    let (status, answer) = post(&server, "?presett=default", "[]");
    assert_eq!((status, problem(&answer).0), (400, "bad-query"), "{answer}");
    assert!(problem(&answer).1.contains("presett"), "{answer}");

    // A trace of invalid items names the item and the field.
    let invalid = "[{\"id\": \"e1\", \"type\": \"set_var\", \"timestamp\": \"soon\", \"key\": \"k\", \"value\": 1}]";
    let (status, answer) = post(&server, "", invalid);
    assert_eq!(status, 422, "{answer}");
    assert!(problem(&answer).1.contains("e1"), "{answer}");

    // Events under cache-stable compile (stubs stay where they were placed), not refused.
    let (status, answer) = post(
        &server,
        "?preset=cache-stable",
        read("examples/coding-session.jsonl"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["preset"], "cache-stable", "{answer}");
    assert!(
        answer["output"]
            .as_str()
            .is_some_and(|o| o.starts_with('[')),
        "{answer}"
    );

    let (status, answer) = get(&server, "/api/nothing-here");
    assert_eq!((status, problem(&answer).0), (404, "not-found"), "{answer}");
}

#[test]
fn stored_sessions_and_their_receipts_on_every_backend() {
    // The fill is checked against a store in memory first.
    fill(&mut MemoryStore::new());
    for db in ctxgc_store::testing::test_databases() {
        let mut store = db.open().unwrap();
        fill(&mut store);
        let server = Server::start(
            ConsoleOptions::default(),
            Some(StoreHandle::new(store, &db.location)),
        );
        let (status, list) = get(&server, "/api/sessions");
        assert_eq!(status, 200, "{}: {list}", db.backend);
        assert_eq!(list["store"]["backend"], db.backend);
        let ids: Vec<&str> = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["context_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["coding", "support"], "{}", db.backend);

        for (id, file) in [
            ("coding", "examples/coding-session.jsonl"),
            ("support", "examples/support-session.json"),
        ] {
            let (status, answer) = get(&server, &format!("/api/sessions/{id}"));
            assert_eq!(status, 200, "{}: {answer}", db.backend);
            let view = &answer["compiled"];
            // Stored, then compiled: the same output as compiling the file.
            let direct = ctxgc_core::compile(&read(file), &Options::default()).unwrap();
            assert_eq!(
                view["output"].as_str(),
                Some(direct.output.as_str()),
                "{id}"
            );
            assert_receipts_exact(view);
            // Each receipt is served from the store, byte for byte.
            let first = &view["receipts"][0];
            let rid = first["id"].as_str().unwrap();
            let (status, receipt) = get(&server, &format!("/api/receipts/{rid}?session={id}"));
            assert_eq!(status, 200, "{receipt}");
            assert_eq!(
                receipt["original"], first["original"],
                "{}: {id}",
                db.backend
            );
            assert_eq!(receipt["hash"], first["hash"]);
            assert_eq!(receipt["utf8"], true);
        }
        let (status, answer) = get(&server, "/api/sessions/absent");
        assert_eq!((status, problem(&answer).0), (404, "not-found"), "{answer}");
        let (status, answer) = get(&server, "/api/receipts/e1");
        assert_eq!((status, problem(&answer).0), (400, "missing-session"));
        let (status, answer) = get(&server, "/api/receipts/nope?session=coding");
        assert_eq!((status, problem(&answer).0), (404, "not-found"), "{answer}");
    }
}

#[test]
fn without_a_store_the_sessions_tab_says_so() {
    let server = plain();
    let (status, list) = get(&server, "/api/sessions");
    assert_eq!(status, 200);
    assert!(list["store"].is_null());
    let (status, answer) = get(&server, "/api/sessions/x");
    assert_eq!(status, 404);
    assert!(problem(&answer).1.contains("--db"), "{answer}");
}

#[test]
fn the_page_is_served_whole_from_the_binary() {
    let server = plain();
    server.runtime.block_on(async {
        let page = client().get(server.url("/")).send().await.unwrap();
        assert_eq!(page.status().as_u16(), 200);
        let policy = page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(policy.contains("script-src 'self'"), "{policy}");
        let html = page.text().await.unwrap();
        assert!(html.contains("/assets/app.js") && html.contains("/assets/style.css"));
        for asset in ["/assets/app.js", "/assets/style.css"] {
            let r = client().get(server.url(asset)).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200, "{asset}");
            let text = r.text().await.unwrap();
            // Nothing comes from elsewhere: the console works offline.
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{asset}"
            );
        }
        assert!(!html.contains("http://") && !html.contains("https://"));
        let r = client()
            .get(server.url("/assets/other.js"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404);
    });
    let (status, examples) = get(&server, "/api/examples");
    assert_eq!(status, 200);
    assert_eq!(examples.as_array().unwrap().len(), 2);
    let text = server.runtime.block_on(async {
        client()
            .get(server.url("/api/examples/coding-session.jsonl"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert_eq!(text, read("examples/coding-session.jsonl"));
}

#[test]
fn a_token_guards_every_route_and_foreign_hosts_and_origins_are_refused() {
    let server = Server::start(
        ConsoleOptions {
            token: Some("s3cret-token".into()),
            ..ConsoleOptions::default()
        },
        None,
    );
    server.runtime.block_on(async {
        let status = |r: reqwest::Response| r.status().as_u16();
        let url = server.url("/api/passes");
        assert_eq!(status(client().get(&url).send().await.unwrap()), 401);
        let wrong = client()
            .get(&url)
            .bearer_auth("guess")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status().as_u16(), 401);
        let body: Value = wrong.json().await.unwrap();
        assert_eq!(body["error"]["problem"], "unauthorized");
        assert_eq!(
            status(
                client()
                    .get(&url)
                    .bearer_auth("s3cret-token")
                    .send()
                    .await
                    .unwrap()
            ),
            200
        );
        let page = server.url("/?token=s3cret-token");
        assert_eq!(status(client().get(&page).send().await.unwrap()), 200);
        let rebinding = client()
            .get(&url)
            .bearer_auth("s3cret-token")
            .header("host", "evil.example:80")
            .send()
            .await
            .unwrap();
        assert_eq!(status(rebinding), 403);
        let foreign = client()
            .post(server.url("/api/compile"))
            .bearer_auth("s3cret-token")
            .header("origin", "http://evil.example")
            .body("[]")
            .send()
            .await
            .unwrap();
        assert_eq!(status(foreign), 403);
    });
}

#[test]
fn report_pages_in_the_folder_are_linked_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bench.html"), "<!DOCTYPE html><p>bench</p>").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a page").unwrap();
    let server = Server::start(
        ConsoleOptions {
            reports_dir: Some(dir.path().to_path_buf()),
            ..ConsoleOptions::default()
        },
        None,
    );
    let (status, list) = get(&server, "/api/reports");
    assert_eq!(status, 200);
    let names: Vec<&str> = list["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bench.html"]);
    server.runtime.block_on(async {
        let page = client()
            .get(server.url("/reports/bench.html"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
        assert!(page.text().await.unwrap().contains("bench"));
        for path in ["/reports/notes.txt", "/reports/..%2Fsecret.html"] {
            let r = client().get(server.url(path)).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 404, "{path}");
        }
    });
    assert!(repo_file("examples").is_dir());
}

/// The replayed cost per preset is what `ctxgc bench` gives for the same input, for every
/// chat format.
#[test]
fn replayed_cost_per_preset_is_the_bench_figure() {
    let server = plain();
    for path in [
        "examples/support-session.json",
        "examples/bench/corpus-sample.jsonl",
        // A system prompt, which Anthropic sends as a field of its own, not as a message.
        "crates/ctxgc-core/tests/fixtures/chat/anthropic_session.json",
    ] {
        let text = read(path);
        let (status, view) = post(&server, "?preset=aggressive", text.clone());
        assert_eq!(status, 200, "{path}: {view}");
        let config = ctxgc_bench::BenchConfig {
            timing: false,
            ..ctxgc_bench::BenchConfig::default()
        };
        let input = ctxgc_bench::InputFile {
            path: path.to_owned(),
            text: Ok(text),
        };
        let report = ctxgc_bench::run(&[input], &config, &mut |_| {});
        let bench = |strategy: &str| {
            report
                .totals
                .iter()
                .find(|s| s.strategy == strategy)
                .unwrap_or_else(|| panic!("bench has {strategy}"))
        };
        let presets = view["presets"].as_array().expect("presets");
        assert_eq!(presets.len(), 5, "{path}");
        for (preset, strategy) in [
            ("lossless", "ctxgc-lossless"),
            ("default", "ctxgc"),
            ("aggressive", "ctxgc-aggressive"),
            ("cache-stable", "ctxgc-cache"),
            ("eager", "ctxgc"),
        ] {
            let replayed = &presets
                .iter()
                .find(|p| p["preset"] == preset)
                .unwrap_or_else(|| panic!("{path}: preset {preset} listed"))["replayed"];
            let expected = bench(strategy);
            assert!(
                expected.replay_cost > 0.0,
                "{path}: {strategy} replays requests"
            );
            assert_eq!(
                replayed["cost"].as_f64(),
                Some(expected.replay_cost),
                "{path} {preset}"
            );
            assert_eq!(
                replayed["full_cost"].as_f64(),
                Some(expected.full_replay_cost),
                "{path} {preset}"
            );
            assert_eq!(
                replayed["relative_to_full"].as_f64(),
                expected.replay_relative,
                "{path} {preset}"
            );
            assert_eq!(
                replayed["cached_share"].as_f64(),
                expected.cached_share,
                "{path} {preset}"
            );
            assert!(
                replayed["requests"].as_u64().unwrap_or(0) > 0,
                "{path} {preset}"
            );
        }
    }
}

/// A stored chat's growth and cache-stable compaction steps, from a SQLite store: each step is
/// the compiler's own, with the tokens of the stored prefix where it was taken.
#[test]
fn a_stored_chat_shows_its_compaction_steps_with_tokens_at_each() {
    use ctxgc_core::store::Store;
    use ctxgc_core::store::chat::{ChatAppend, append_chat};

    let db = ctxgc_store::testing::sqlite();
    let mut store = db.open().unwrap();
    fill(&mut store);
    // Real conversations from the corpus sample, each stored as a chat session (none of them
    // runs long enough for a step to pay), and an agent that reads the same log over and over:
    // every read makes the previous one stale, so cache-stable compilation steps.
    let sample = read("examples/bench/corpus-sample.jsonl");
    let mut ids = Vec::new();
    for (n, line) in sample.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let record: Value = serde_json::from_str(line).unwrap();
        let messages = serde_json::to_string(&record["messages"]).unwrap();
        let id = format!("sample-{n}");
        append_chat(&mut store, &id, &messages, &ChatAppend::default()).unwrap();
        ids.push(id);
    }
    append_chat(
        &mut store,
        "log-reader",
        &log_reader_session(24),
        &ChatAppend::default(),
    )
    .unwrap();
    ids.push("log-reader".to_owned());
    let mut cache_stable = Options::default();
    cache_stable.chat.cache = Some(ctxgc_core::session::CacheModel::default());
    let expected: Vec<(
        String,
        ctxgc_core::Compiled,
        ctxgc_core::store::chat::ChatTranscript,
    )> = ids
        .iter()
        .map(|id| {
            let transcript = store.chat_transcript(id).unwrap().unwrap();
            (
                id.clone(),
                transcript.compile(&cache_stable).unwrap(),
                transcript,
            )
        })
        .collect();
    let server = Server::start(
        ConsoleOptions::default(),
        Some(StoreHandle::new(store, &db.location)),
    );
    let mut steps_seen = 0;
    for (id, whole, transcript) in &expected {
        let (status, answer) = get(&server, &format!("/api/sessions/{id}/steps"));
        assert_eq!(status, 200, "{id}: {answer}");
        assert_eq!(
            answer["session"]["messages"].as_u64(),
            Some(transcript.messages.len() as u64)
        );
        assert_eq!(
            answer["session"]["tokens_after"].as_u64(),
            Some(whole.tokens_after as u64),
            "{id}"
        );
        let want = whole
            .chat
            .as_ref()
            .unwrap()
            .compaction_steps
            .clone()
            .unwrap();
        let got = answer["steps"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{id}");
        for (step, want) in got.iter().zip(&want) {
            assert_eq!(step["at"].as_u64(), Some(want.at as u64), "{id}");
            let items: Vec<&str> = step["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap())
                .collect();
            assert_eq!(items, want.items, "{id}");
            assert_eq!(
                step["tokens_saved"].as_u64(),
                Some(want.tokens_saved as u64)
            );
            let prefix = ctxgc_core::store::chat::ChatTranscript {
                messages: transcript.messages[..want.at].to_vec(),
                ..transcript.clone()
            };
            let at = prefix.compile(&cache_stable).unwrap();
            assert_eq!(
                step["tokens_before"].as_u64(),
                Some(at.tokens_before as u64)
            );
            assert_eq!(step["tokens_after"].as_u64(), Some(at.tokens_after as u64));
            assert!(
                at.tokens_after < at.tokens_before,
                "{id}: the step compacted"
            );
            steps_seen += 1;
        }
    }
    assert!(
        steps_seen > 1,
        "the log reader's session takes compaction steps"
    );
    // An event trace takes no cache-stable steps; an unknown session is named.
    let (status, answer) = get(&server, "/api/sessions/coding/steps");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(problem(&answer).0, "bad-request");
    assert!(problem(&answer).1.contains("coding"));
    let (status, answer) = get(&server, "/api/sessions/nope/steps");
    assert_eq!(status, 404, "{answer}");
    assert!(problem(&answer).1.contains("nope"));
    let (status, answer) = get(&server, "/api/sessions/support/steps?preset=aggressive");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(problem(&answer).0, "bad-query");
}

/// An agent session that reads the same 200-line log before every answer (each read makes the
/// previous one stale), as an OpenAI message list.
fn log_reader_session(turns: usize) -> String {
    let mut messages =
        vec![serde_json::json!({"role": "system", "content": "You are an on-call agent."})];
    for t in 0..turns {
        let id = format!("call_{t}");
        messages.push(serde_json::json!({"role": "user", "content": format!("Request {t}: is booking healthy?")}));
        messages.push(
            serde_json::json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": "read_log", "arguments": "{\"service\":\"booking\"}"}}]}),
        );
        let log: String = (0..200)
            .map(|l| {
                format!(
                    "line {l}: booking worker {} ok, queue depth {}, revision {t}\n",
                    l % 7,
                    (l * t) % 13
                )
            })
            .collect();
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id, "content": log}));
        messages
            .push(serde_json::json!({"role": "assistant", "content": format!("Checked ({t}).")}));
    }
    serde_json::to_string(&messages).unwrap()
}

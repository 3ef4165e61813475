//! `expand` answers for every output the proxy ever trimmed, from its store: after the
//! proxy process was killed with SIGKILL, from a `receipts.json` of an earlier version, and
//! on both backends (SQLite and PostgreSQL).

mod common;

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_core::projection::apply::{MemoryReceipts, ReceiptStore, TrimReceipt, reference_of};
use ctxgc_core::projection::auto::AutoConfig;
use ctxgc_proxy::automatic::AutoShaper;
use ctxgc_proxy::receipts::StoreReceipts;
use ctxgc_proxy::shaping::OutputShaper;
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(20);
const TOKEN: &str = "crash-token-3b7e21";
/// Set for the child process: the work directory of the proxy it runs.
const CHILD_DIR: &str = "CTXGC_CRASH_TEST_DIR";
const AIRPORTS: [&str; 6] = ["DUB", "LIS", "MAD", "OSL", "CPH", "VIE"];

fn route(i: usize) -> Value {
    json!({"origin": AIRPORTS[i % 6], "destination": AIRPORTS[(i + 2) % 6]})
}

fn config() -> AutoConfig {
    AutoConfig {
        min_runs: 3,
        ..AutoConfig::default()
    }
}

fn servers() -> ctxgc_proxy::config::ServerSet {
    set_of(
        vec![stdio_server("travel", &["--tools", "search_flights"])],
        &[],
    )
}

/// The proxy as a process of its own (this test binary, run again as the child), serving
/// HTTP on loopback until it is killed.
#[test]
#[ignore = "the child process of expand_answers_after_the_proxy_was_killed"]
fn child_proxy_process() {
    let dir = std::env::var_os(CHILD_DIR).expect("started by the crash test");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let shaper = Arc::new(AutoShaper::open(Path::new(&dir), config()).unwrap());
        let core = core(&servers(), shaper, TIMEOUT);
        core.connect_all().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("LISTENING http://{}/mcp", listener.local_addr().unwrap());
        use std::io::Write;
        std::io::stdout().flush().unwrap();
        ctxgc_proxy::http::serve(listener, core, &security(TOKEN), std::future::pending())
            .await
            .unwrap();
    });
}

fn answer_from(output: &str) -> String {
    let v: Value = serde_json::from_str(output).expect("flights JSON");
    let f = &v["flights"][2];
    format!(
        "Book {} with {} for {} EUR.",
        f["id"].as_str().unwrap(),
        f["airline"].as_str().unwrap(),
        f["price"]["amount"].as_str().unwrap()
    )
}

fn reference_in(output: &str) -> Option<String> {
    let footer = output.split("\n[hidden: ").nth(1)?;
    Some(
        footer
            .split("expand ref \"")
            .nth(1)?
            .split('"')
            .next()?
            .to_owned(),
    )
}

async fn direct_flights(args: Value) -> String {
    let direct = direct_stdio(&["--tools", "search_flights"]).await;
    let text = text_of(
        &direct
            .call_tool(call("search_flights", args))
            .await
            .unwrap(),
    );
    direct.cancel().await.unwrap();
    text
}

#[tokio::test]
async fn expand_answers_after_the_proxy_was_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_proxy_process", "--nocapture"])
        .env(CHILD_DIR, &dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("LISTENING ").map(str::to_owned))
    })
    .await
    .unwrap()
    .expect("the child proxy listens");

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(TOKEN.to_owned()),
    );
    let agent = Agent::default().serve(transport).await.unwrap();
    // Three observed runs, then every output is trimmed.
    for run in 0..3 {
        let (observed, _) = call_text(&agent, "search_flights", route(run)).await;
        assert!(reference_in(&observed).is_none());
        call_text(
            &agent,
            "ctxgc_done",
            json!({"answer": answer_from(&observed)}),
        )
        .await;
    }
    let mut trimmed = Vec::new();
    for i in 3..6 {
        let (output, _) = call_text(&agent, "search_flights", route(i)).await;
        let reference = reference_in(&output).unwrap_or_else(|| panic!("not trimmed: {output}"));
        trimmed.push((i, reference));
    }

    // SIGKILL: nothing is flushed, no destructor runs.
    child.kill().unwrap();
    child.wait().unwrap();
    drop(agent);

    // A new proxy over the same directory gives back every original exactly.
    let shaper = Arc::new(AutoShaper::open(&dir, config()).unwrap());
    let (agent, _) = proxy_over_pipe(core(&servers(), shaper, TIMEOUT)).await;
    for (i, reference) in &trimmed {
        let (whole, is_error) =
            call_text(&agent, "expand", json!({"ref": reference, "fields": ["*"]})).await;
        assert!(!is_error, "{whole}");
        assert_eq!(whole, direct_flights(route(*i)).await, "output {i}");
        let (one, is_error) = call_text(
            &agent,
            "expand",
            json!({"ref": reference, "fields": ["flights[0].fare_rules"]}),
        )
        .await;
        assert!(!is_error, "{one}");
        assert!(one.contains("fare_rules"), "{one}");
    }
    agent.cancel().await.unwrap();
}

#[test]
fn an_earlier_receipts_file_is_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    std::fs::create_dir_all(&dir).unwrap();
    let original = r#"{"id": 7, "notes": "kept \"exactly\" as sent", "n": 1.50}"#;
    let reference = reference_of("get_thing", original);
    let mut old = MemoryReceipts::with_capacity(1024);
    old.put(TrimReceipt {
        reference: reference.clone(),
        tool: "get_thing".into(),
        original: original.into(),
        hidden: vec!["notes".into()],
    })
    .unwrap();
    std::fs::write(
        dir.join("receipts.json"),
        serde_json::to_string(&old).unwrap(),
    )
    .unwrap();

    let expand = json!({"ref": reference, "fields": ["*"]});
    let shaper = AutoShaper::open(&dir, config()).unwrap();
    assert_eq!(shaper.expand(&expand).unwrap(), original);
    assert!(!dir.join("receipts.json").exists());
    assert!(dir.join("receipts.json.imported").is_file());
    drop(shaper);
    // Imported once, kept for good.
    let shaper = AutoShaper::open(&dir, config()).unwrap();
    assert_eq!(shaper.expand(&expand).unwrap(), original);
    assert_eq!(
        shaper
            .expand(&json!({"ref": reference, "fields": ["notes"]}))
            .unwrap(),
        r#"{"notes":"kept \"exactly\" as sent"}"#
    );
}

#[test]
fn receipts_round_trip_on_every_backend() {
    // Set up outside the runtime (the test helpers use a blocking client)...
    let databases = ctxgc_store::testing::test_databases();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for db in databases {
        let _inside = runtime.enter();
        let original = "{\"a\": [1, 2], \"b\": \"x\"}";
        let reference = reference_of("tool", original);
        let receipt = |hidden: &[&str]| TrimReceipt {
            reference: reference.clone(),
            tool: "tool".into(),
            original: original.into(),
            hidden: hidden.iter().map(|h| (*h).to_owned()).collect(),
        };
        // ...the store opened and used from inside it, as the proxy does.
        let mut store = StoreReceipts::open(&db.location).unwrap();
        assert_eq!(store.get(&reference).unwrap(), None, "{}", db.backend);
        store.put(receipt(&["a"])).unwrap();
        // The same output trimmed again under another projection: its fields list is the
        // newer one, its original the same.
        store.put(receipt(&["a", "b"])).unwrap();
        drop(store);
        let store = StoreReceipts::open(&db.location).unwrap();
        assert_eq!(
            store.get(&reference).unwrap(),
            Some(receipt(&["a", "b"])),
            "{}",
            db.backend
        );
    }
}

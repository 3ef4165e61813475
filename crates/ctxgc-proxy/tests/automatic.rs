//! `--auto DIR` through the proxy, with a real server and a real agent client: the first runs
//! are observed unchanged, later ones trimmed; a tool expanded too often stops being trimmed;
//! a restart keeps what was learned.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_core::projection::auto::AutoConfig;
use ctxgc_proxy::automatic::AutoShaper;
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(20);
const AIRPORTS: [&str; 8] = ["DUB", "LIS", "MAD", "OSL", "CPH", "VIE", "ZRH", "BRU"];

fn open(dir: &Path) -> Arc<AutoShaper> {
    let config = AutoConfig {
        min_runs: 3,
        ..AutoConfig::default()
    };
    Arc::new(AutoShaper::open(dir, config).expect("work directory opens"))
}

fn route(i: usize) -> Value {
    json!({"origin": AIRPORTS[i % 8], "destination": AIRPORTS[(i + 3) % 8]})
}

/// What the agent's answer reuses from a flights output: one flight's id, airline and price.
fn answer_from(output: &str) -> String {
    let body = output.split("\n[hidden:").next().unwrap_or(output);
    let v: Value = serde_json::from_str(body).expect("flights JSON");
    let f = &v["flights"][2];
    format!(
        "Book {} with {}, departing {}, for {} EUR.",
        f["id"].as_str().unwrap(),
        f["airline"].as_str().unwrap(),
        f["departure"].as_str().unwrap(),
        f["price"]["amount"].as_str().unwrap()
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
async fn observes_then_trims_backs_off_and_survives_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ctxgc-data");
    let servers = set_of(
        vec![stdio_server("travel", &["--tools", "search_flights"])],
        &[],
    );

    // Runs 1-3: observed, every output exactly as the server sent it.
    let shaper = open(&dir);
    let (agent, _) = proxy_over_pipe(core(&servers, shaper.clone(), TIMEOUT)).await;
    let tools = names(&agent.list_all_tools().await.unwrap());
    assert_eq!(tools, ["ctxgc_done", "expand", "search_flights"]);
    for run in 0..3 {
        let (output, _) = call_text(&agent, "search_flights", route(run)).await;
        assert_eq!(
            output,
            direct_flights(route(run)).await,
            "run {run} was changed"
        );
        let (receipt, is_error) = call_text(
            &agent,
            "ctxgc_done",
            json!({"answer": answer_from(&output)}),
        )
        .await;
        assert!(!is_error, "{receipt}");
    }
    assert_eq!(shaper.progress(), (3, true));

    // Run 4: trimmed; what the answers used is kept.
    let (output, _) = call_text(&agent, "search_flights", route(3)).await;
    let original = direct_flights(route(3)).await;
    assert!(output.contains("\n[hidden: "), "{output}");
    assert!(
        output.len() < original.len() / 2,
        "{} vs {}",
        output.len(),
        original.len()
    );
    let body: Value = serde_json::from_str(output.split("\n[hidden:").next().unwrap()).unwrap();
    let kept = &body["flights"][5];
    let full: Value = serde_json::from_str(&original).unwrap();
    assert_eq!(kept["id"], full["flights"][5]["id"]);
    assert_eq!(
        kept["price"]["amount"],
        full["flights"][5]["price"]["amount"]
    );
    assert!(kept.get("fare_rules").is_none());
    call_text(
        &agent,
        "ctxgc_done",
        json!({"answer": answer_from(&output)}),
    )
    .await;
    agent.cancel().await.unwrap();

    // Everything lives in the private work directory.
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    for file in [
        "state.json",
        "ctxgc.db",
        "report.html",
        "traces/000001.jsonl",
        "traces/000004.jsonl",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    let trace = std::fs::read_to_string(dir.join("traces/000001.jsonl")).unwrap();
    assert!(trace.contains("fare_rules"), "traces keep full outputs");
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("search_flights"));

    // Restart: a new proxy over the same directory trims from its first call.
    drop(shaper);
    let shaper = open(&dir);
    assert_eq!(shaper.progress(), (4, true));
    let (agent, _) = proxy_over_pipe(core(&servers, shaper.clone(), TIMEOUT)).await;
    let (output, _) = call_text(&agent, "search_flights", route(4)).await;
    assert!(
        output.contains("\n[hidden: "),
        "not trimmed after a restart: {output}"
    );

    // The agent keeps asking back what was hidden: after enough of that, the tool is no
    // longer trimmed (and the report says why).
    let mut trimmed_then_expanded = 0;
    for i in 4..12 {
        let (output, _) = if i == 4 {
            (output.clone(), false)
        } else {
            call_text(&agent, "search_flights", route(i)).await
        };
        let Some(footer) = output.split("\n[hidden: ").nth(1) else {
            break;
        };
        let reference = footer
            .split("expand ref \"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let (whole, is_error) =
            call_text(&agent, "expand", json!({"ref": reference, "fields": ["*"]})).await;
        assert!(!is_error);
        assert_eq!(whole, direct_flights(route(i)).await);
        trimmed_then_expanded += 1;
    }
    // Stopped before the loop ran out: an output came back untrimmed.
    assert!(
        (2..8).contains(&trimmed_then_expanded),
        "{trimmed_then_expanded}"
    );
    let disabled = shaper.disabled_tools();
    assert_eq!(disabled.len(), 1, "{disabled:?}");
    assert_eq!(disabled[0].0, "search_flights");
    let (output, _) = call_text(&agent, "search_flights", route(13)).await;
    assert_eq!(output, direct_flights(route(13)).await);
    agent.cancel().await.unwrap();

    // ...and that survives a restart too.
    ctxgc_proxy::shaping::OutputShaper::flush(&*shaper);
    drop(shaper);
    let shaper = open(&dir);
    assert_eq!(shaper.disabled_tools().len(), 1);
    // The run left open was closed without an answer: kept as a trace, not learned from.
    assert_eq!(shaper.progress(), (4, true));
    assert!(dir.join("traces/000005.jsonl").is_file());
    let (agent, _) = proxy_over_pipe(core(&servers, shaper.clone(), TIMEOUT)).await;
    let (output, _) = call_text(&agent, "search_flights", route(14)).await;
    assert_eq!(output, direct_flights(route(14)).await);
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn the_report_is_served_over_http_behind_the_token() {
    let tmp = tempfile::tempdir().unwrap();
    let servers = set_of(
        vec![stdio_server("travel", &["--tools", "search_flights"])],
        &[],
    );
    let proxy = HttpProxy::start(
        core(&servers, open(&tmp.path().join("d")), TIMEOUT),
        security("report-token-99"),
    )
    .await;
    let (agent, _) = proxy.agent("report-token-99").await;
    call_text(&agent, "search_flights", route(0)).await;
    call_text(&agent, "ctxgc_done", json!({"answer": "nothing"})).await;
    let client = reqwest::Client::new();
    let url = format!("{}/report", proxy.base);
    assert_eq!(client.get(&url).send().await.unwrap().status(), 401);
    let page = client
        .get(&url)
        .bearer_auth("report-token-99")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<html") && html.contains("search_flights"),
        "{html}"
    );
    let via_query = client
        .get(format!("{url}?token=report-token-99"))
        .send()
        .await
        .unwrap();
    assert_eq!(via_query.status(), 200);
    agent.cancel().await.unwrap();
}

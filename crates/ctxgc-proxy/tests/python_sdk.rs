//! Servers built with the official Python MCP SDK (FastMCP): every annotated tool declares an
//! output schema, so results carry structured content that clients validate. A real server
//! (`tests/python/sdk_server.py`, with `-> str`, `-> dict[str, Any]` and pydantic return
//! types) behind the proxy in automatic mode, and the SDK's own client as the agent
//! (`tests/python/sdk_client.py`): after the learning runs every output is trimmed, the
//! client's schema validation passes, and `expand` gives back the exact original.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_core::projection::auto::AutoConfig;
use ctxgc_proxy::automatic::AutoShaper;
use ctxgc_proxy::config::{ServerSpec, UpstreamTransport};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(60);
const TOKEN: &str = "python-sdk-token-4d2c";
const LEARNING_RUNS: usize = 3;

/// The interpreter with the official SDK: `CTXGC_TEST_PYTHON`, else the repository's
/// `.venv`; without either the test is skipped with a note, except under CI.
fn python() -> Option<PathBuf> {
    let from_env = std::env::var_os("CTXGC_TEST_PYTHON").map(PathBuf::from);
    let repo_venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    match from_env.or_else(|| repo_venv.is_file().then_some(repo_venv)) {
        Some(python) => Some(python),
        None if std::env::var_os("CI").is_some()
            || std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some() =>
        {
            panic!("no Python with the MCP SDK: set CTXGC_TEST_PYTHON (scripts/python-venv.sh)")
        }
        None => {
            eprintln!("note: Python SDK test skipped: set CTXGC_TEST_PYTHON to a venv with `mcp`");
            None
        }
    }
}

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
        .display()
        .to_string()
}

fn body_of(text: &str) -> Value {
    serde_json::from_str(text.split("\n[hidden: ").next().unwrap()).expect("JSON body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_outputs_are_trimmed_validated_and_expanded() {
    let Some(python) = python() else {
        return;
    };
    let server = script("sdk_server.py");
    let servers = set_of(
        vec![ServerSpec {
            name: "travel".into(),
            transport: UpstreamTransport::Stdio {
                command: python.display().to_string(),
                args: vec![server.clone()],
                env: vec![],
                cwd: None,
            },
        }],
        &[],
    );
    let tmp = tempfile::tempdir().unwrap();
    let config = AutoConfig {
        min_runs: LEARNING_RUNS as u64,
        ..AutoConfig::default()
    };
    let shaper = Arc::new(AutoShaper::open(&tmp.path().join("work"), config).unwrap());
    let core = core(&servers, shaper, TIMEOUT);
    let log = core.clone();
    let proxy = HttpProxy::start(core, security(TOKEN)).await;

    let run = tokio::process::Command::new(&python)
        .arg(script("sdk_client.py"))
        .arg(format!("{}/mcp", proxy.base))
        .arg(TOKEN)
        .arg(&server)
        .arg((LEARNING_RUNS + 1).to_string())
        .output()
        .await
        .expect("the SDK client runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    // The client validates structured content against the published schemas: a failure
    // there fails the run.
    assert!(run.status.success(), "SDK client failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&run.stdout).expect("a JSON report");

    // Published schemas: the string wrapper keeps its string; the pydantic model's fields
    // are optional everywhere (nested models included).
    let schemas = &report["schemas"];
    assert_eq!(
        schemas["search_flights"]["properties"]["result"]["type"],
        "string"
    );
    let order_schema = schemas["get_order"].to_string();
    assert!(order_schema.contains("audit_trail"), "{order_schema}");
    assert!(!order_schema.contains("\"required\""), "{order_schema}");

    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), LEARNING_RUNS + 1);
    // Observed runs: nothing hidden.
    for output in runs[0].as_array().unwrap() {
        assert!(
            !output["text"].as_str().unwrap().contains("[hidden: "),
            "{output}"
        );
    }
    // After learning: every tool's output trimmed, its structured copy in line with the
    // text, and expand gives back exactly what the server sent.
    for output in runs[LEARNING_RUNS].as_array().unwrap() {
        let tool = output["tool"].as_str().unwrap();
        let text = output["text"].as_str().unwrap();
        let direct = output["direct_text"].as_str().unwrap();
        assert!(text.contains("\n[hidden: "), "{tool} not trimmed: {text}");
        assert!(
            text.len() * 2 < direct.len(),
            "{tool}: {} of {} bytes",
            text.len(),
            direct.len()
        );
        assert_eq!(output["expanded"].as_str(), Some(direct), "{tool}: expand");
        let structured = &output["structured"];
        match tool {
            // `-> str`: trimmed inside the string field.
            "search_flights" => assert_eq!(structured["result"].as_str(), Some(text)),
            // Objects: the structured copy is the trimmed body, without the hidden fields.
            _ => {
                assert_eq!(structured, &body_of(text), "{tool}");
                assert_ne!(structured, &output["direct_structured"], "{tool}");
            }
        }
        // What the answers used is still there.
        let kept = body_of(text);
        match tool {
            "search_flights" => assert!(kept["flights"][1]["price"]["amount"].is_string()),
            "find_hotels" => assert!(kept["hotels"][0]["name"].is_string(), "{kept}"),
            _ => assert!(kept["order_id"].is_string(), "{kept}"),
        }
    }
    // The per-call line says which path each output took.
    let notes: Vec<(String, String)> = log
        .log()
        .recent()
        .into_iter()
        .filter(|r| r.fields_hidden > 0)
        .map(|r| (r.tool, r.note.unwrap_or_default()))
        .collect();
    for (tool, path) in [
        (
            "search_flights",
            "trimmed inside the string field \"result\"",
        ),
        ("find_hotels", "trimmed like the text"),
        ("get_order", "trimmed like the text"),
    ] {
        assert!(
            notes.iter().any(|(t, n)| t == tool && n.contains(path)),
            "{tool}: {notes:?}"
        );
    }
}

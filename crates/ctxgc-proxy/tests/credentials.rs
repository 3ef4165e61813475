//! Credentials never leave the place they are meant for. The proxy's own token and an
//! upstream's credential (passed in its environment) must appear nowhere but there: not in
//! the per-call log lines on stderr, not in the work directory (the SQLite store of originals,
//! the traces, the learned state, the report), not in the report page, not in any answer or
//! error an agent or an intruder gets. The proxy runs in a child process (this test binary
//! again) so that its stderr is read whole.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_core::projection::auto::AutoConfig;
use ctxgc_proxy::automatic::AutoShaper;
use serde_json::json;

const TOKEN: &str = "proxy-SECRET-token-6f3a1b";
const UPSTREAM_KEY: &str = "upstream-SECRET-key-0c9d2e";
const CHILD_DIR: &str = "CTXGC_CREDENTIALS_CHILD_DIR";
const AIRPORTS: [&str; 6] = ["DUB", "LIS", "MAD", "OSL", "CPH", "VIE"];

/// The proxy in automatic mode over HTTP, and an agent and an intruder talking to it.
#[test]
#[ignore = "the child process of credentials_appear_nowhere_else"]
fn credentials_child() {
    let dir = std::env::var_os(CHILD_DIR).expect("started by the parent test");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let shaper = Arc::new(
            AutoShaper::open(
                Path::new(&dir),
                AutoConfig {
                    min_runs: 3,
                    ..AutoConfig::default()
                },
            )
            .unwrap(),
        );
        let servers = set_of(
            vec![stdio_server_with_env(
                "travel",
                &["--require-env", "TEST_API_KEY"],
                &[("TEST_API_KEY", UPSTREAM_KEY)],
            )],
            &[UPSTREAM_KEY],
        );
        let proxy = HttpProxy::start(
            core(&servers, shaper, Duration::from_secs(20)),
            security(TOKEN),
        )
        .await;
        let (agent, _) = proxy.agent(TOKEN).await;
        for i in 0..8 {
            let args = json!({"origin": AIRPORTS[i % 6], "destination": AIRPORTS[(i + 2) % 6]});
            let (text, _) = call_text(&agent, "search_flights", args).await;
            println!("ANSWER search_flights: {text}");
        }
        for tool in [
            "whoami",
            "leak_credential",
            "fail_with_credential",
            "no_such_tool",
        ] {
            match agent.call_tool(call(tool, json!({}))).await {
                Ok(result) => {
                    println!("ANSWER {tool}: {}", serde_json::to_string(&result).unwrap())
                }
                Err(e) => println!("ANSWER {tool}: error {e}"),
            }
        }
        let (text, _) = call_text(&agent, "expand", json!({"ref": "search_flights#nope"})).await;
        println!("ANSWER expand: {text}");
        agent.cancel().await.unwrap();

        // An intruder: a wrong token, the token in the query, a near miss.
        let http = reqwest::Client::new();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        for (auth, query) in [
            (Some("Bearer wrong-token"), ""),
            (None, &*format!("?token={TOKEN}")),
            (Some(&*format!("Bearer {TOKEN}x")), ""),
            (Some(&*format!("Basic {TOKEN}")), ""),
        ] {
            let mut r = http
                .post(format!("{}/mcp{query}", proxy.base))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body.clone());
            if let Some(auth) = auth {
                r = r.header("authorization", auth);
            }
            let r = r.send().await.unwrap();
            println!(
                "INTRUDER {}: {}",
                r.status().as_u16(),
                r.text().await.unwrap_or_default()
            );
        }
        let r = http
            .get(format!("{}/report?token={TOKEN}", proxy.base))
            .send()
            .await
            .unwrap();
        println!(
            "REPORT {}: {}",
            r.status().as_u16(),
            r.text().await.unwrap_or_default()
        );
    });
}

fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
}

#[test]
fn credentials_appear_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "credentials_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR, &work)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // The scenario ran: the upstream was authenticated, calls were logged, outputs trimmed,
    // the misbehaving tools answered, intruders were refused, the report was served.
    assert!(stdout.contains(r#"authenticated\":true"#), "{stdout}");
    assert!(stdout.contains("credential hidden by ctxgc"), "{stdout}");
    assert!(stderr.contains("search_flights"), "no call log: {stderr}");
    assert_eq!(stdout.matches("INTRUDER 401").count(), 4, "{stdout}");
    assert!(stdout.contains("REPORT 200"), "{stdout}");
    let mut files = Vec::new();
    files_under(&work, &mut files);
    assert!(
        files.iter().any(|(name, _)| name.ends_with("ctxgc.db")),
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for secret in [TOKEN, UPSTREAM_KEY] {
        let answers: String = stdout
            .lines()
            .filter(|l| !l.starts_with("running") && !l.contains(" ... "))
            .collect();
        assert!(!answers.contains(secret), "{secret} in an answer: {stdout}");
        assert!(!stderr.contains(secret), "{secret} in the log: {stderr}");
        for (name, bytes) in &files {
            assert!(
                !String::from_utf8_lossy(bytes).contains(secret),
                "{secret} in {name}"
            );
        }
    }
}

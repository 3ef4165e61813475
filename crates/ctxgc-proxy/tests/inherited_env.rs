//! Credentials a stdio upstream inherits from the proxy's environment (never written in any
//! configuration) do not reach the agent, in any encoding, and are never written into the
//! automatic mode's work directory. One test in this file: it sets process environment
//! variables, which the upstream child inherits.

mod common;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use common::*;
use ctxgc_core::projection::auto::AutoConfig;
use ctxgc_proxy::automatic::AutoShaper;
use ctxgc_proxy::redact::Redactor;
use ctxgc_proxy::shaping::OutputShaper;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(20);
/// Named like a credential: hidden without being named.
const API_KEY_VAR: &str = "CTXGC_TEST_INHERITED_API_KEY";
/// A quote and a backslash: JSON writes it escaped, the raw form alone would not match.
const API_KEY: &str = "inh\"erit\\ed-5e0b91";
/// Named like a setting: hidden because `--secret-env` names it.
const SETTING_VAR: &str = "CTXGC_TEST_INHERITED_SETTING";
const SETTING: &str = "setting-value-a7c2f0";

fn forms_of(secret: &str) -> Vec<String> {
    let inner = |text: &str| {
        let json = serde_json::to_string(text).unwrap();
        json[1..json.len() - 1].to_owned()
    };
    let escaped = inner(secret);
    vec![
        secret.to_owned(),
        inner(&escaped),
        escaped,
        base64::engine::general_purpose::STANDARD.encode(secret)[..8].to_owned(),
    ]
}

fn assert_clean(what: &str, seen: &str) {
    for secret in [API_KEY, SETTING] {
        for form in forms_of(secret) {
            assert!(!seen.contains(&form), "{what}: {form:?} leaked: {seen}");
        }
    }
}

#[tokio::test]
async fn inherited_credentials_are_hidden_from_the_agent_and_the_work_directory() {
    // SAFETY: the only test of this binary; the upstream children read these.
    unsafe {
        std::env::set_var(API_KEY_VAR, API_KEY);
        std::env::set_var(SETTING_VAR, SETTING);
    }
    let mut servers = set_of(
        vec![
            stdio_server("keyed", &["--require-env", API_KEY_VAR]),
            stdio_server("set", &["--require-env", SETTING_VAR]),
        ],
        &[],
    );
    // What `ctxgc proxy --secret-env CTXGC_TEST_INHERITED_SETTING` does.
    servers.add_inherited_env(std::env::vars(), &[SETTING_VAR.to_owned()]);
    assert!(Redactor::new(servers.secrets.clone()).finds_any(API_KEY));

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("work");
    let config = AutoConfig {
        min_runs: 1,
        ..AutoConfig::default()
    };
    let shaper = Arc::new(AutoShaper::open(&dir, config).unwrap());
    let (agent, _) = proxy_over_pipe(core(&servers, shaper.clone(), TIMEOUT)).await;
    let mut seen = serde_json::to_string(&agent.list_all_tools().await.unwrap()).unwrap();
    for server in ["keyed", "set"] {
        // The upstream did get its credential...
        let (whoami, _) = call_text(&agent, &format!("{server}_whoami"), json!({})).await;
        assert_eq!(whoami, r#"{"authenticated":true}"#);
        // ...and the tools that echo it hand over only the placeholder.
        let (leak, _) = call_text(&agent, &format!("{server}_leak_credential"), json!({})).await;
        assert!(leak.contains("credential hidden by ctxgc"), "{leak}");
        seen.push_str(&leak);
        match agent
            .call_tool(call(&format!("{server}_fail_with_credential"), json!({})))
            .await
        {
            Ok(result) => seen.push_str(&serde_json::to_string(&result).unwrap()),
            Err(err) => seen.push_str(&err.to_string()),
        }
    }
    assert_clean("agent", &seen);
    call_text(
        &agent,
        "ctxgc_done",
        json!({"answer": format!("the key was {API_KEY}")}),
    )
    .await;
    agent.cancel().await.unwrap();
    shaper.flush();

    // Traces, state, report and stored originals: none holds either credential.
    let mut files = 0;
    let mut stack = vec![dir.clone()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert_clean(&path.display().to_string(), &text);
            files += 1;
        }
    }
    assert!(files >= 3, "the work directory was written ({files} files)");
    assert!(dir.join("traces/000001.jsonl").is_file());
}

//! `ctxgc proxy` as a user starts it: the stdio gate of the real binary, short credentials
//! announced at start, blank HTTP tokens refused.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::Value;

fn ctxgc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
}

#[test]
fn over_stdio_every_line_gets_an_answer_and_short_credentials_are_announced() {
    let mut child = ctxgc()
        // An upstream that cannot start: the proxy still serves the agent.
        .args(["proxy", "--upstream-cmd", "false", "--timeout", "5"])
        .env("CTXGC_TEST_SHORT_API_KEY", "abc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ctxgc runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answer = |stdin: &mut std::process::ChildStdin, line: &str| -> Value {
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        let mut out = String::new();
        stdout.read_line(&mut out).unwrap();
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"))
    };
    let garbage = answer(&mut stdin, "hello, is this MCP?");
    assert_eq!(garbage["error"]["code"], -32700, "{garbage}");
    let init = answer(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
    );
    assert_eq!(
        init["result"]["serverInfo"]["name"], "ctxgc-proxy",
        "{init}"
    );
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("shorter than 6 characters cannot be redacted"),
        "{stderr}"
    );
}

#[test]
fn a_blank_http_token_is_refused_before_anything_starts() {
    for (flag, env) in [(Some("   "), None), (None, Some(" \t "))] {
        let mut command = ctxgc();
        command.args(["proxy", "--upstream-cmd", "false", "--http", "0"]);
        if let Some(token) = flag {
            command.args(["--token", token]);
        }
        match env {
            Some(token) => command.env("CTXGC_TOKEN", token),
            None => command.env_remove("CTXGC_TOKEN"),
        };
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("token"), "{stderr}");
    }
}

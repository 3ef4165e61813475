//! Over stdio, a line that is not a JSON-RPC message gets an answer (`-32700` / `-32600`)
//! and the session goes on: the real proxy behind the same gate `ctxgc proxy` uses, spoken
//! to line by line as an agent's stdin/stdout would.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_proxy::server::ProxyServer;
use ctxgc_proxy::shaping::PassThrough;
use ctxgc_proxy::stdio_gate::gate;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TIMEOUT: Duration = Duration::from_secs(20);

struct Wire {
    stdin: tokio::io::DuplexStream,
    stdout: tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
}

impl Wire {
    async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
    }

    async fn answer(&mut self) -> Value {
        let line = tokio::time::timeout(TIMEOUT, self.stdout.next_line())
            .await
            .expect("an answer comes")
            .unwrap()
            .expect("stdout open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is JSON ({e}): {line}"))
    }
}

async fn proxy_on_wire() -> Wire {
    let servers = set_of(vec![stdio_server("s", &["--tools", "echo"])], &[]);
    let core = core(&servers, Arc::new(PassThrough), TIMEOUT);
    core.connect_all().await;
    let (agent_stdin, proxy_stdin) = tokio::io::duplex(1 << 16);
    let (proxy_stdout, agent_stdout) = tokio::io::duplex(1 << 16);
    let (reads, writes, _flushed) = gate(proxy_stdin, proxy_stdout);
    tokio::spawn(async move {
        if let Ok(running) = ProxyServer::new(core).serve((reads, writes)).await {
            let _ = running.waiting().await;
        }
    });
    Wire {
        stdin: agent_stdin,
        stdout: BufReader::new(agent_stdout).lines(),
    }
}

#[tokio::test]
async fn lines_that_are_not_messages_are_answered_and_the_session_goes_on() {
    let mut wire = proxy_on_wire().await;
    wire.send("this is not json").await;
    let answer = wire.answer().await;
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null);

    // JSON, but no JSON-RPC message: Invalid Request, with the id it carried.
    wire.send(r#"{"id": 41, "hello": "world"}"#).await;
    let answer = wire.answer().await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], 41);

    // A blank line is no message and gets no answer; the next real request is answered.
    wire.send("   ").await;
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        .to_string(),
    )
    .await;
    let answer = wire.answer().await;
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["serverInfo"]["name"], "ctxgc-proxy");
    wire.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    // Garbage in the middle of a session does not end it.
    wire.send("{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": ")
        .await;
    assert_eq!(wire.answer().await["error"]["code"], -32700);
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "still here"}}})
        .to_string(),
    )
    .await;
    let answer = wire.answer().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "still here");
}

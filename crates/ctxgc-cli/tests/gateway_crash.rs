//! `ctxgc gateway` killed with SIGKILL in the middle of a call (the provider has the request
//! and has not answered) and started again on the same store: the conversation it had
//! stored is intact, so the next request of that conversation compiles incrementally on top
//! of it, and what goes upstream is what a stateless `ctxgc compile --preset cache-stable`
//! of the same request gives.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":2,"total_tokens":122}}"#;

/// Reads one HTTP/1.1 request (head and Content-Length body).
fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// A provider that hands every request body to the test; while `stall` is set it never
/// answers (the connection stays open), otherwise it answers at once.
fn provider(stall: Arc<AtomicBool>) -> (String, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (tx, stall) = (tx.clone(), stall.clone());
            std::thread::spawn(move || {
                while let Some(body) = read_request(&mut stream) {
                    let _ = tx.send(body);
                    if stall.load(Ordering::SeqCst) {
                        // Hold the request until the gateway goes away.
                        let mut sink = Vec::new();
                        let _ = stream.read_to_end(&mut sink);
                        return;
                    }
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{ANSWER}",
                        ANSWER.len()
                    );
                }
            });
        }
    });
    (format!("http://{addr}"), rx)
}

/// Starts `ctxgc gateway` on `db`; its address and its stderr lines.
fn start_gateway(upstream: &str, db: &Path) -> (Killed, String, mpsc::Receiver<String>) {
    let child = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(["gateway", "--upstream", upstream, "--port", "0", "--db"])
        .arg(db)
        .env_remove("CTXGC_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let stderr = child.0.stderr.take().unwrap();
    let (lines_tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let addr = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the gateway says where it listens");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    (child, addr, lines)
}

/// Posts a chat request to the gateway under the session name `crash`; the raw response.
fn post(addr: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\nx-ctxgc-session: crash\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

fn tool_output(rows: usize) -> String {
    let rows: Vec<String> = (0..rows)
        .map(|i| {
            format!(
                "{{\n        \"seat\": \"{i}A\",\n        \"free\": {}\n    }}",
                i % 2 == 0
            )
        })
        .collect();
    format!("[\n    {}\n]", rows.join(",\n    "))
}

#[test]
fn a_gateway_killed_mid_call_restarts_with_its_conversation_intact() {
    let stall = Arc::new(AtomicBool::new(true));
    let (upstream, received) = provider(stall.clone());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gateway.db");

    let mut messages = vec![
        json!({"role": "system", "content": "You help travellers pick seats."}),
        json!({"role": "user", "content": "Which seats are free?"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "seats", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": tool_output(12)}),
    ];
    let first = json!({"model": "m", "messages": messages}).to_string();

    // The first gateway compiles and stores the conversation, forwards it, and is killed
    // while the provider holds the request.
    let (mut gateway, addr, _lines) = start_gateway(&upstream, &db);
    let caller = {
        let (addr, first) = (addr.clone(), first.clone());
        std::thread::spawn(move || post(&addr, &first))
    };
    received
        .recv_timeout(Duration::from_secs(60))
        .expect("the provider has the first request");
    gateway.0.kill().unwrap();
    gateway.0.wait().unwrap();
    let cut_off = caller.join().unwrap();
    assert!(
        !cut_off.contains(ANSWER),
        "the killed gateway cannot have answered: {cut_off}"
    );

    // A second gateway on the same store continues the conversation incrementally.
    stall.store(false, Ordering::SeqCst);
    let (_gateway, addr, lines) = start_gateway(&upstream, &db);
    messages.push(json!({"role": "assistant", "content": "Seats 0A, 2A and 4A are free."}));
    messages.push(json!({"role": "user", "content": "Take 2A."}));
    let second = json!({"model": "m", "messages": messages}).to_string();
    let response = post(&addr, &second);
    assert!(response.contains(ANSWER), "{response}");
    let sent = received
        .recv_timeout(Duration::from_secs(60))
        .expect("the provider has the second request");

    let entry = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a log line for the request");
        if line.starts_with('{') {
            break serde_json::from_str::<Value>(&line).unwrap();
        }
    };
    assert_eq!(entry["status"], 200, "{entry}");
    assert_eq!(entry["compile"], "incremental", "{entry}");
    assert_eq!(entry["new_items"], 2, "{entry}");
    assert_eq!(
        entry["completed"], true,
        "the whole answer reached the client: {entry}"
    );

    // What went upstream is what a stateless compile of the request gives.
    let request = dir.path().join("second.json");
    std::fs::write(&request, &second).unwrap();
    let stateless = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(["compile", "--preset", "cache-stable"])
        .arg(&request)
        .output()
        .unwrap();
    assert!(
        stateless.status.success(),
        "{}",
        String::from_utf8_lossy(&stateless.stderr)
    );
    let expected: Value = serde_json::from_slice(&stateless.stdout).unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(sent, expected);
}

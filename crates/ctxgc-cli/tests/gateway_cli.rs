//! `ctxgc gateway` as a user runs it: started with `--upstream URL --port 0`, it prints where
//! it listens, compiles a chat request on its way to a provider on loopback (here a small
//! recording one), passes the answer back, logs one JSON line without the credential, keeps
//! the conversation in its SQLite store, and shows its counters at `/metrics`. Killed with
//! SIGKILL in the middle of a call and started again on the same store, it continues the
//! conversation it had stored.

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

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":2,"total_tokens":122,"prompt_tokens_details":{"cached_tokens":64}}}"#;

/// Reads one HTTP/1.1 request (head and Content-Length body); `None` once the peer is gone.
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
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
    Some((head, body))
}

/// A provider that answers one request and hands it to the test.
fn fake_provider() -> (String, mpsc::Receiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept()
            && let Some(request) = read_request(&mut stream)
        {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
                ANSWER.len()
            );
            let _ = tx.send(request);
        }
    });
    (format!("http://{addr}"), rx)
}

/// Sends one request to the gateway and returns status line and body.
fn call(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        request.push_str(&format!("{n}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    // A gateway killed mid-call leaves the response cut off (or empty).
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// Starts `ctxgc gateway --upstream UPSTREAM --port 0 --db DB`: the process, the address it
/// listens on, and its stderr lines.
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

/// The next JSON log line.
fn next_log_entry(lines: &mpsc::Receiver<String>) -> Value {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a log line");
        if line.starts_with('{') {
            return serde_json::from_str(&line).unwrap();
        }
    }
}

#[test]
fn the_gateway_compiles_forwards_logs_and_counts() {
    let (upstream, received) = fake_provider();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/gateway.db");
    let (_gateway, addr, lines) = start_gateway(&upstream, &db);

    let rows: Vec<String> = (0..8)
        .map(|i| format!("{{\n        \"seat\": \"{i}A\",\n        \"free\": true\n    }}"))
        .collect();
    let tool = format!("[\n    {}\n]", rows.join(",\n    "));
    let body = serde_json::json!({"model": "m", "messages": [
        {"role": "user", "content": "Seats?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "seats", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": tool},
        {"role": "user", "content": "Pick one."}
    ]})
    .to_string();
    let (status, answer) = call(
        &addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("authorization", "Bearer sk-cli-secret-4471"),
            ("content-type", "application/json"),
        ],
        &body,
    );
    assert!(status.contains("200"), "{status} {answer}");
    assert_eq!(answer, ANSWER);
    let (head, sent) = received.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer sk-cli-secret-4471"),
        "{head}"
    );
    let sent: serde_json::Value = serde_json::from_slice(&sent).unwrap();
    let compiled = sent["messages"][2]["content"].as_str().unwrap();
    assert!(
        compiled.len() < tool.len() && !compiled.contains("\n    "),
        "{compiled}"
    );

    // One JSON line for the request, and the credential nowhere in the log.
    let mut log = Vec::new();
    let line = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a log line");
        log.push(line.clone());
        if line.starts_with('{') {
            break line;
        }
    };
    let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(entry["status"], 200);
    assert_eq!(entry["usage"]["cache_read_tokens"], 64);
    assert_eq!(entry["compile"], "full");
    assert!(log.iter().all(|l| !l.contains("sk-cli-secret")), "{log:?}");

    let (status, metrics) = call(&addr, "GET", "/metrics", &[], "");
    assert!(status.contains("200"), "{status}");
    assert!(
        metrics.contains("ctxgc_gateway_requests_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ctxgc_gateway_cache_read_tokens_total 64"),
        "{metrics}"
    );
    assert!(db.is_file(), "the store was created at --db");
}

#[test]
fn bad_settings_are_usage_errors() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ctxgc"))
            .args(args)
            .env_remove("CTXGC_TOKEN")
            .output()
            .unwrap()
    };
    let out = run(&["gateway", "--upstream", "ftp://example.com"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http:// or https://"));
    let out = run(&["gateway", "--upstream", "openai", "--bind", "0.0.0.0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a token"));
    let out = run(&["gateway", "--upstream", "openai", "--preset", "extreme"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["gateway", "--upstream", "openai", "--upstream", "openai"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("takes the same requests"));
}

/// A provider that hands every request body to the test; while `stall` is set it never
/// answers (the connection stays open until the gateway goes away), otherwise it answers.
fn stalling_provider(stall: Arc<AtomicBool>) -> (String, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (tx, stall) = (tx.clone(), stall.clone());
            std::thread::spawn(move || {
                while let Some((_, body)) = read_request(&mut stream) {
                    let _ = tx.send(body);
                    if stall.load(Ordering::SeqCst) {
                        let _ = stream.read_to_end(&mut Vec::new());
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

/// Killed with SIGKILL while the provider holds a request, then started again on the same
/// store: the stored conversation is intact, the next request compiles incrementally on top
/// of it, and what goes upstream is what a stateless `ctxgc compile --preset cache-stable`
/// of that request gives.
#[test]
fn a_gateway_killed_mid_call_restarts_with_its_conversation_intact() {
    let stall = Arc::new(AtomicBool::new(true));
    let (upstream, received) = stalling_provider(stall.clone());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gateway.db");
    let session = [
        ("content-type", "application/json"),
        ("x-ctxgc-session", "crash"),
    ];
    let rows: Vec<String> = (0..12)
        .map(|i| {
            format!(
                "{{\n        \"seat\": \"{i}A\",\n        \"free\": {}\n    }}",
                i % 2 == 0
            )
        })
        .collect();
    let mut messages = vec![
        json!({"role": "system", "content": "You help travellers pick seats."}),
        json!({"role": "user", "content": "Which seats are free?"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "seats", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": format!("[\n    {}\n]", rows.join(",\n    "))}),
    ];
    let first = json!({"model": "m", "messages": messages}).to_string();

    let (mut gateway, addr, _lines) = start_gateway(&upstream, &db);
    let caller = {
        let (addr, first) = (addr.clone(), first.clone());
        std::thread::spawn(move || call(&addr, "POST", "/v1/chat/completions", &session, &first))
    };
    received
        .recv_timeout(Duration::from_secs(60))
        .expect("the provider has the first request");
    gateway.0.kill().unwrap();
    gateway.0.wait().unwrap();
    let (_, cut_off) = caller.join().unwrap();
    assert!(
        !cut_off.contains(ANSWER),
        "the killed gateway answered: {cut_off}"
    );

    stall.store(false, Ordering::SeqCst);
    let (_gateway, addr, lines) = start_gateway(&upstream, &db);
    messages.push(json!({"role": "assistant", "content": "Seats 0A, 2A and 4A are free."}));
    messages.push(json!({"role": "user", "content": "Take 2A."}));
    let second = json!({"model": "m", "messages": messages}).to_string();
    let (status, answer) = call(&addr, "POST", "/v1/chat/completions", &session, &second);
    assert!(status.contains("200"), "{status} {answer}");
    assert_eq!(answer, ANSWER);
    let sent = received
        .recv_timeout(Duration::from_secs(60))
        .expect("the provider has the second request");
    let entry = next_log_entry(&lines);
    assert_eq!(entry["status"], 200, "{entry}");
    assert_eq!(entry["compile"], "incremental", "{entry}");
    assert_eq!(entry["new_items"], 2, "{entry}");
    assert_eq!(
        entry["completed"], true,
        "the whole answer reached the client: {entry}"
    );

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
    assert_eq!(serde_json::from_slice::<Value>(&sent).unwrap(), expected);
}

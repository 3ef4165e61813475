//! `ctxgc gateway` as a user runs it: started with `--upstream URL --port 0`, it prints where
//! it listens, compiles a chat request on its way to a provider on loopback (here a small
//! recording one), passes the answer back, logs one JSON line without the credential, keeps
//! the conversation in its SQLite store, and shows its counters at `/metrics`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":2,"total_tokens":122,"prompt_tokens_details":{"cached_tokens":64}}}"#;

/// Reads one HTTP/1.1 request (head and Content-Length body).
fn read_request(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
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
    reader.read_exact(&mut body).unwrap();
    (head, body)
}

/// A provider that answers one request and hands it to the test.
fn fake_provider() -> (String, mpsc::Receiver<(String, Vec<u8>)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let request = read_request(&mut stream);
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
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[test]
fn the_gateway_compiles_forwards_logs_and_counts() {
    let (upstream, received) = fake_provider();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/gateway.db");
    let child = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(["gateway", "--upstream", &upstream, "--port", "0", "--db"])
        .arg(&db)
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

//! The agent's side over stdio, with a gate in front of the MCP layer: every line read is
//! checked first, and one that is not a JSON-RPC message is answered here (`-32700` when it
//! is not JSON, `-32600` when it is JSON but no message), never dropped in silence nor
//! allowed to end the session. One writer task owns the output, so the answers of the gate
//! and those of the MCP layer never interleave inside a line.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Longest line accepted (a larger one is answered with a parse error and skipped).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// What the gate makes of one input line.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A message: pass it on.
    Forward,
    /// Blank: nothing to do.
    Skip,
    /// Not a message: send this answer back.
    Answer(String),
}

/// Judges one line (without its newline).
///
/// ```
/// use ctxgc_proxy::stdio_gate::{judge, Verdict};
/// assert_eq!(judge(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Verdict::Forward);
/// let Verdict::Answer(a) = judge(b"hello") else { panic!() };
/// assert!(a.contains("-32700"));
/// let Verdict::Answer(a) = judge(br#"{"id": 7}"#) else { panic!() };
/// assert!(a.contains("-32600") && a.contains("\"id\":7"));
/// ```
pub fn judge(line: &[u8]) -> Verdict {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => {
            return Verdict::Answer(error_line(
                Value::Null,
                -32700,
                &format!("Parse error: the line is not JSON ({err})"),
            ));
        }
    };
    if serde_json::from_value::<ClientJsonRpcMessage>(value.clone()).is_ok() {
        return Verdict::Forward;
    }
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    Verdict::Answer(error_line(
        id,
        -32600,
        "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
    ))
}

fn error_line(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// Connects `input`/`output` (the process's stdin/stdout) to an MCP transport: returns the
/// two ends the MCP layer reads from and writes to, and the writer task, which ends once
/// everything written has been flushed (await it before the process exits, or the last
/// answers may be lost). The gate runs on spawned tasks until `input` ends.
pub fn gate<R, W>(
    input: R,
    output: W,
) -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_mcp, mcp_reads) = tokio::io::duplex(1 << 20);
    let (mcp_writes, from_mcp) = tokio::io::duplex(1 << 20);
    let (lines, mut outgoing) = mpsc::channel::<Vec<u8>>(64);

    // The only writer of `output`.
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = outgoing.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                return;
            }
        }
    });

    // What the MCP layer writes, line by line, to the writer.
    let answers = lines.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(from_mcp);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        return;
                    }
                }
            }
        }
    });

    // Input: messages to the MCP layer, anything else answered here.
    tokio::spawn(async move {
        let mut reader = BufReader::new(input);
        let mut to_mcp = to_mcp;
        loop {
            let mut line = Vec::new();
            let read = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut line)
                .await;
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_LINE_BYTES && !line.ends_with(b"\n") {
                // Skip the rest of the oversized line, then answer it.
                loop {
                    let mut rest = Vec::new();
                    match (&mut reader)
                        .take(MAX_LINE_BYTES as u64)
                        .read_until(b'\n', &mut rest)
                        .await
                    {
                        Ok(0) | Err(_) => break,
                        Ok(_) if rest.ends_with(b"\n") => break,
                        Ok(_) => {}
                    }
                }
                let answer = error_line(Value::Null, -32700, "Parse error: line too long");
                if lines
                    .send(format!("{answer}\n").into_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
                continue;
            }
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            match judge(body) {
                Verdict::Skip => {}
                Verdict::Forward => {
                    let mut message = body.to_vec();
                    message.push(b'\n');
                    if to_mcp.write_all(&message).await.is_err() {
                        break;
                    }
                }
                Verdict::Answer(answer) => {
                    if lines
                        .send(format!("{answer}\n").into_bytes())
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        // End of input: the MCP layer sees its input close and ends the session.
        let _ = to_mcp.shutdown().await;
    });

    (mcp_reads, mcp_writes, writer)
}

//! `external:COMMAND`: any other compactor, scored on exactly the same metrics.
//!
//! For each prefix the command is run through `sh -c COMMAND` with the prefix on stdin: a JSON
//! list of the input's items, each as the original bytes (chat messages for a transcript,
//! events for an event trace; the request object when an item cannot be a list entry, see
//! [`crate::prepare::Prepared::prefix_json`]). It must print a JSON list on stdout: either items in the same
//! format (read back through the same front-end, so `{"messages": [...]}` works too), or a
//! list of strings, each one segment of prompt text (for compactors that print a prompt).
//! A run that fails, exits non-zero, prints something unreadable or takes longer than the
//! timeout is an error for that input only; the bench goes on.
//!
//! An external compactor's receipts are not visible to the bench, so nothing it removes counts
//! as recoverable: a value it drops is a miss unless it is still visible.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::context::{Context, Segment, SegmentKind};
use crate::strategy::{Prefix, SpecError, Strategy, StrategyError};

/// A compactor run as a command.
#[derive(Debug, Clone)]
pub struct External {
    name: String,
    command: String,
    timeout: Duration,
}

impl External {
    /// The command, with a time limit per run.
    pub fn new(command: &str, timeout: Duration) -> Result<Self, SpecError> {
        let command = command.trim();
        if command.is_empty() {
            return Err(SpecError::Parameter {
                strategy: "external".into(),
                message: "no command given: use external:COMMAND".into(),
            });
        }
        Ok(External {
            name: format!("external:{command}"),
            command: command.to_owned(),
            timeout,
        })
    }
}

/// What a finished run gave.
struct RunOutput {
    status: std::process::ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `sh -c command` with `stdin`, killing it after `timeout`.
fn run_with_timeout(command: &str, stdin: String, timeout: Duration) -> Result<RunOutput, String> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command);
    // Its own process group, so a timeout ends the whole pipeline the command started.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start `sh -c {command}`: {e}"))?;
    let mut input = child.stdin.take();
    // Writing and reading happen on their own threads so a command that prints before it
    // has read all its input cannot deadlock the bench.
    let writer = thread::spawn(move || {
        if let Some(pipe) = input.as_mut() {
            // A command that exits without reading everything closes the pipe; that is its
            // business, judged by its exit status and output.
            let _ = pipe.write_all(stdin.as_bytes());
        }
        drop(input);
    });
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let reader = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                // The whole group the command started (its own, set at spawn), by the system
                // call itself: never a process group the bench does not own.
                #[cfg(unix)]
                if let Ok(group) = i32::try_from(child.id())
                    && group > 1
                {
                    // SAFETY: killpg only sends a signal; `group` is the child's own group id.
                    unsafe {
                        libc::killpg(group, libc::SIGKILL);
                    }
                }
                let _ = child.kill();
                let _ = child.wait();
                let _ = writer.join();
                return Err(format!("timed out after {:.1} s", timeout.as_secs_f64()));
            }
            Ok(None) => thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for the command: {e}")),
        }
    };
    let _ = writer.join();
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(RunOutput {
        status,
        stdout,
        stderr,
    })
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let start = text.char_indices().rev().nth(300).map_or(0, |(i, _)| i);
    text[start..].to_owned()
}

impl Strategy for External {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!(
            "`{}` on each prefix (JSON list on stdin, compacted list on stdout, {:.0} s limit)",
            self.command,
            self.timeout.as_secs_f64()
        )
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let run = run_with_timeout(&self.command, input.prefix_json(prefix.len), self.timeout)
            .map_err(StrategyError)?;
        if !run.status.success() {
            return Err(StrategyError(format!(
                "exited with {}: {}",
                run.status,
                tail(&run.stderr)
            )));
        }
        let stdout = std::str::from_utf8(&run.stdout)
            .map_err(|e| StrategyError(format!("output is not UTF-8: {e}")))?;
        let value: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            StrategyError(format!(
                "output is not JSON ({e}): {}",
                tail(stdout.as_bytes())
            ))
        })?;
        let context = match &value {
            Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_string) => {
                let segments: Vec<Segment> = items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| Segment {
                        text: s.to_owned(),
                        kind: SegmentKind::Content,
                    })
                    .collect();
                Context {
                    items_kept: segments.len(),
                    segments,
                    ..Context::default()
                }
            }
            Value::Array(_) | Value::Object(_) => {
                let mut context =
                    crate::strategy::ctxgc::message_context(input.conversation.format, stdout)?;
                context.items_kept = context.segments.len();
                context
            }
            _ => {
                return Err(StrategyError(
                    "output must be a JSON list of items or of strings".into(),
                ));
            }
        };
        Ok(context)
    }
}

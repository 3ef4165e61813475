//! Helpers the CLI test files share.

use std::io::{ErrorKind, Write};
use std::process::{Command, Output, Stdio};

/// Runs `ctxgc ARGS` with `input` on stdin and waits for it.
///
/// A command that rejects its input (bad JSON, a payload over the limit) may exit before it
/// has read all of stdin; the write then fails with a broken pipe, which is not a failure of
/// the test: the exit status and stderr, which the tests assert, say what happened.
pub fn ctxgc_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ctxgc runs");
    let written = child.stdin.take().expect("stdin").write_all(input);
    if let Err(e) = written {
        assert_eq!(e.kind(), ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("ctxgc exits")
}

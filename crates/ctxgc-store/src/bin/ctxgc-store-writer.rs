//! `ctxgc-store-writer`: appends generated events to a stored session, one transaction per
//! batch, and prints every acknowledged item. A load generator for the store: the
//! durability and concurrency tests kill it or run two at once, and it measures append
//! throughput against any database.
//!
//! ```text
//! ctxgc-store-writer --db PATH|URL --context ID [--prefix P] [--count N] [--batch K] [--strict]
//! ```
//!
//! Each event is a `set_var` whose `parent_id` is the writer's previous event, so a stored
//! session that lost or reordered one no longer validates. After each append it prints, and
//! flushes, one line per item: `ack SEQ ID BLAKE3`. On a conflict (another writer appended
//! first) it catches up and retries, printing `conflict EXPECTED`; with `--strict` it exits
//! with status 3 instead. `--count 0` appends until killed.

use std::io::Write;
use std::process::ExitCode;

use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::store::content_hash;
use ctxgc_core::{Format, Session};
use ctxgc_store::{Location, StoreError, StoredSession};

struct Args {
    db: String,
    context: String,
    prefix: String,
    count: u64,
    batch: u64,
    strict: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: String::new(),
        context: String::new(),
        prefix: "w".into(),
        count: 100,
        batch: 1,
        strict: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--db" => args.db = value("--db")?,
            "--context" => args.context = value("--context")?,
            "--prefix" => args.prefix = value("--prefix")?,
            "--count" => {
                args.count = value("--count")?
                    .parse()
                    .map_err(|e| format!("--count: {e}"))?
            }
            "--batch" => {
                args.batch = value("--batch")?
                    .parse()
                    .map_err(|e| format!("--batch: {e}"))?
            }
            "--strict" => args.strict = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.db.is_empty() || args.context.is_empty() {
        return Err("usage: ctxgc-store-writer --db PATH|URL --context ID [--prefix P] [--count N] [--batch K] [--strict]".into());
    }
    if args.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    Ok(args)
}

/// The writer's `n`th event.
fn event(prefix: &str, n: u64) -> String {
    let parent = if n == 0 {
        String::new()
    } else {
        format!(r#","parent_id":"{prefix}{}""#, n - 1)
    };
    format!(
        r#"{{"id":"{prefix}{n}","type":"set_var","timestamp":{n}{parent},"key":"{prefix}k{}","value":{n}}}"#,
        n % 17
    )
}

fn run(args: &Args) -> Result<(), (u8, String)> {
    let fail = |e: StoreError| (1, e.to_string());
    let store = ctxgc_store::open(&Location::parse(&args.db)).map_err(fail)?;
    let mut stored = StoredSession::open(store, &args.context, Session::new(Default::default()))
        .map_err(fail)?;
    let mut stdout = std::io::stdout().lock();
    let mut n = 0u64;
    let mut appended = 0u64;
    while args.count == 0 || appended < args.count {
        let texts: Vec<String> = (n..n + args.batch)
            .map(|k| event(&args.prefix, k))
            .collect();
        let items =
            lower_events(&texts.join("\n"), &Default::default()).map_err(|e| (1, e.to_string()))?;
        let ids: Vec<String> = items.iter().map(|item| item.id.clone()).collect();
        match stored.append(Format::Events, items) {
            Ok(seqs) => {
                for ((seq, text), id) in seqs.zip(&texts).zip(&ids) {
                    writeln!(stdout, "ack {seq} {id} {}", content_hash(text.as_bytes()))
                        .and_then(|()| stdout.flush())
                        .map_err(|e| (1, format!("stdout: {e}")))?;
                }
                n += args.batch;
                appended += 1;
            }
            Err(StoreError::Conflict { expected, .. }) => {
                writeln!(stdout, "conflict {expected}")
                    .and_then(|()| stdout.flush())
                    .map_err(|e| (1, format!("stdout: {e}")))?;
                if args.strict {
                    return Err((3, format!("conflict at sequence {expected}")));
                }
                stored.refresh().map_err(fail)?;
            }
            Err(e) => return Err(fail(e)),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("ctxgc-store-writer: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("ctxgc-store-writer: {message}");
            ExitCode::from(code)
        }
    }
}

//! `ctxgc session append|compile|receipt|list`: sessions kept in a database, so an agent loop
//! can append as it goes and compile from any process, on any instance sharing the database.
//!
//! The database is `--db PATH|URL`, else `$CTXGC_DB`, else `.ctxgc/ctxgc.db` under the
//! working directory (SQLite); a `postgres://` URL selects PostgreSQL.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use ctxgc_core::compile::report_events;
use ctxgc_core::formats::Family;
use ctxgc_core::frontend::lower_conversations;
use ctxgc_core::store::chat::is_chat_format;
use ctxgc_core::store::{StoreError, StoredSession};
use ctxgc_core::{Compiled, Format, Options, Session};
use ctxgc_store::{AnyStore, Location, Store};
use serde_json::json;

use super::session_chat;
use crate::Failure;
use crate::input::{CompileOptions, read_input};

/// How many times `session append` catches up and retries when other writers keep
/// appending first.
const APPEND_ATTEMPTS: usize = 100;

/// Arguments of `ctxgc session`.
#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    pub command: SessionCommand,
}

/// The `ctxgc session` subcommands.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Append a trace's items, or a chat request's messages and envelope, to a stored session
    /// (created by its first append).
    Append(AppendArgs),
    /// Compile a stored session: the same output as `ctxgc compile` of the whole trace.
    Compile(SessionCompileArgs),
    /// Print the original of an item of a stored session, byte for byte.
    Receipt(SessionReceiptArgs),
    /// List the stored sessions.
    List(ListArgs),
}

/// The database option every `session` subcommand takes.
#[derive(Debug, Args, Clone)]
pub struct DbArg {
    /// The database: a SQLite file, or a postgres://USER[:PASSWORD]@HOST[:PORT]/DB URL
    /// (default: $CTXGC_DB, else .ctxgc/ctxgc.db under the working directory).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<String>,
}

/// Arguments of `ctxgc session append`.
#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The session's id.
    #[arg(value_parser = session_id)]
    pub context_id: String,
    /// The trace whose items to append, or the chat request (OpenAI, Anthropic or Responses
    /// document, bare message list, or conversation record) whose messages to append: its
    /// envelope (system prompt, tools, other fields) replaces the stored one (stdin when
    /// absent or `-`).
    pub file: Option<PathBuf>,
    /// Append only if the session holds exactly this many items; otherwise fail with exit
    /// code 3 (another writer appended first) instead of appending after them.
    #[arg(long, value_name = "SEQ")]
    pub expect_seq: Option<u64>,
    /// In a file of many conversations (corpus JSONL), the one to append, by record id.
    #[arg(long, value_name = "ID")]
    pub record: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Arguments of `ctxgc session compile`.
#[derive(Debug, Args)]
pub struct SessionCompileArgs {
    /// The session's id.
    #[arg(value_parser = session_id)]
    pub context_id: String,
    /// Print one JSON object: output, tokens, decisions, receipts.
    #[arg(long)]
    pub json: bool,
    /// Print the plan only (decisions), not the output.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Arguments of `ctxgc session receipt`.
#[derive(Debug, Args)]
pub struct SessionReceiptArgs {
    /// The session's id.
    #[arg(value_parser = session_id)]
    pub context_id: String,
    /// The item's (or receipt's) id.
    pub id: String,
    /// Print one JSON object with the original (as text) and the decision.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Arguments of `ctxgc session list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print a JSON array.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
}

/// Runs `ctxgc session ...`.
pub fn run(args: SessionArgs) -> Result<(), Failure> {
    match args.command {
        SessionCommand::Append(args) => append(args),
        SessionCommand::Compile(args) => compile(args),
        SessionCommand::Receipt(args) => receipt(args),
        SessionCommand::List(args) => list(args),
    }
}

/// A store error as the CLI reports it (a conflict exits with code 3).
pub(crate) fn store_failure(err: StoreError) -> Failure {
    match err {
        StoreError::Conflict { .. } => Failure::Conflict(err.to_string()),
        other => Failure::Input(other.to_string()),
    }
}

fn open_store(db: &DbArg) -> Result<AnyStore, Failure> {
    let location = Location::from_env(db.db.as_deref()).map_err(store_failure)?;
    ctxgc_store::open(&location).map_err(|e| Failure::Input(format!("{location}: {e}")))
}

/// The empty session a stored session of `format` is compiled with. Event traces are stored
/// item by item; chats are stored as transcripts (see `session_chat`).
fn template(format: Format, options: &Options) -> Result<Session, Failure> {
    if format.wire().family() == Family::Events {
        return Ok(ctxgc_core::compile::event_session_template(options));
    }
    Err(Failure::Input(format!(
        "stored sessions hold event traces for now; {} input cannot be appended to one yet",
        format.name()
    )))
}

/// The report `ctxgc compile` gives for a session of `format`.
fn report(format: Format, session: &Session, options: &Options) -> Result<Compiled, Failure> {
    if format.wire().family() == Family::Events {
        return Ok(report_events(session, options.tokenizer));
    }
    Err(Failure::Input(format!(
        "stored {} sessions cannot be compiled yet",
        format.name()
    )))
}

/// Opens a session that must exist, with its format.
fn open_existing(
    context_id: &str,
    db: &DbArg,
    options: &Options,
) -> Result<(StoredSession<AnyStore>, Format), Failure> {
    let mut store = open_store(db)?;
    let format = store
        .info(context_id)
        .map_err(store_failure)?
        .and_then(|info| info.format)
        .ok_or_else(|| {
            Failure::Usage(format!(
                "no session {context_id:?} in this database (`ctxgc session list` shows them)"
            ))
        })?;
    let stored = StoredSession::open(store, context_id, template(format, options)?)
        .map_err(store_failure)?;
    Ok((stored, format))
}

fn append(args: AppendArgs) -> Result<(), Failure> {
    let text = read_input(args.file.as_ref())?;
    let options = args.options.to_options()?;
    let mut conversations = lower_conversations(&text, &options)?;
    let conversation = match &args.record {
        Some(record) => {
            let at = conversations
                .iter()
                .position(|c| c.id == *record)
                .ok_or_else(|| Failure::Usage(format!("no record {record:?} in the input")))?;
            conversations.swap_remove(at)
        }
        None if conversations.len() == 1 => conversations.swap_remove(0),
        None => {
            return Err(Failure::Usage(format!(
                "the input holds {} conversations; choose one with --record ID",
                conversations.len()
            )));
        }
    };
    let format = conversation.format;
    if is_chat_format(format) {
        let mut store = open_store(&args.db)?;
        return session_chat::append(
            &mut store,
            &args.context_id,
            &conversation.raw,
            &options,
            args.expect_seq,
        );
    }
    let count = conversation.items.len();
    let mut stored = StoredSession::open(
        open_store(&args.db)?,
        &args.context_id,
        template(format, &options)?,
    )
    .map_err(store_failure)?;
    if let Some(expected) = args.expect_seq
        && stored.len() != expected
    {
        return Err(store_failure(StoreError::Conflict {
            context_id: args.context_id.clone(),
            expected,
            actual: stored.len(),
        }));
    }
    let mut attempts = 0;
    let appended = loop {
        attempts += 1;
        match stored.append(format, conversation.items.clone()) {
            Ok(range) => break range,
            Err(StoreError::Conflict { .. })
                if args.expect_seq.is_none() && attempts < APPEND_ATTEMPTS =>
            {
                stored.refresh().map_err(store_failure)?;
            }
            Err(err) => return Err(store_failure(err)),
        }
    };
    println!(
        "{}: appended {count} items at sequence {}..{}",
        args.context_id, appended.start, appended.end
    );
    Ok(())
}

fn compile(args: SessionCompileArgs) -> Result<(), Failure> {
    let options = args.options.to_options()?;
    if let Some(chat) = session_chat::transcript(&mut open_store(&args.db)?, &args.context_id)? {
        return session_chat::compile(&chat, &options, args.json, args.dry_run);
    }
    let (mut stored, format) = open_existing(&args.context_id, &args.db, &options)?;
    stored.compile().map_err(store_failure)?;
    let compiled = report(format, stored.session(), &options)?;
    for w in &compiled.warnings {
        eprintln!("ctxgc: warning: {w}");
    }
    if args.dry_run {
        let plan = json!({
            "format": compiled.format,
            "tokens_before": compiled.tokens_before,
            "tokens_after": compiled.tokens_after,
            "decisions": compiled.decisions,
        });
        println!("{}", pretty(&plan)?);
    } else if args.json {
        println!("{}", pretty(&compiled)?);
    } else {
        print!("{}", compiled.output);
    }
    Ok(())
}

fn receipt(args: SessionReceiptArgs) -> Result<(), Failure> {
    let options = args.options.to_options()?;
    if let Some(chat) = session_chat::transcript(&mut open_store(&args.db)?, &args.context_id)? {
        return session_chat::receipt(&chat, &options, &args.id, args.json);
    }
    let (mut stored, _) = open_existing(&args.context_id, &args.db, &options)?;
    stored.compile().map_err(store_failure)?;
    let raw = stored
        .receipt(&args.id)
        .map_err(store_failure)?
        .ok_or_else(|| {
            Failure::Usage(format!(
                "no item with id {:?} in session {:?}",
                args.id, args.context_id
            ))
        })?;
    let decision = stored
        .session()
        .position(&args.id)
        .map(|i| stored.session().decision(i));
    if args.json {
        let original = String::from_utf8_lossy(&raw);
        let out = json!({"id": args.id, "original": original, "decision": decision});
        println!("{}", pretty(&out)?);
    } else {
        let mut stdout = std::io::stdout().lock();
        // The original's bytes exactly, nothing added.
        stdout.write_all(&raw)?;
        stdout.flush()?;
        if let Some(decision) = decision {
            eprintln!(
                "{}",
                serde_json::to_string(&decision).map_err(|e| Failure::Input(e.to_string()))?
            );
        }
    }
    Ok(())
}

fn list(args: ListArgs) -> Result<(), Failure> {
    let mut store = open_store(&args.db)?;
    let sessions = store.sessions().map_err(store_failure)?;
    if args.json {
        println!("{}", pretty(&sessions)?);
    } else {
        for s in sessions {
            let format = s.format.map_or("-", Format::name);
            println!("{}\t{format}\t{} items", escape_id(&s.context_id), s.items);
        }
    }
    Ok(())
}

/// An id as one tab-separated field: backslash, tab, newline and other control characters
/// escaped, so a line is always one session.
fn escape_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Refuses an empty (or blank) session id on the command line.
fn session_id(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        Err("a session id must not be empty".to_owned())
    } else {
        Ok(value.to_owned())
    }
}

/// Pretty JSON, as `ctxgc compile --json` prints it.
fn pretty<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    serde_json::to_string_pretty(value).map_err(|e| Failure::Input(e.to_string()))
}

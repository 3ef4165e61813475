//! The front door: text in, compiled output and its report out.

use crate::chat::compile::{RecordCompiled, record_item_id};
use crate::error::{Diagnostic, Error};
use crate::formats::Format;
use crate::formats::events::lower_events;
use crate::formats::{Lowered, WireFormat};
use crate::frontend::{detect, detect_and_split_unchecked};
use crate::ir::Item;
use crate::plan::{Action, Decision};
use crate::render::prompt;
use crate::session::Session;
use crate::tokens::Tokenizer;

pub(crate) mod options;
pub(crate) mod report;

pub use options::{Counting, Detail, Options, configured_session, event_session_template};
pub use report::{Compiled, Receipt};

/// Lowers an event trace into a compiled [`Session`].
pub fn compile_event_session(text: &str, options: &Options) -> Result<Session, Error> {
    let items = lower_events(text, &options.events)?;
    session_of(&mut Lowered::bare(Format::Events, text, items), options)
}

/// The format of an input, as forced by options or detected.
pub fn input_format(text: &str, options: &Options) -> Result<Format, Error> {
    match options.from {
        Some(f) => Ok(f),
        None => Ok(detect(text)?.format),
    }
}

/// Compiles an input in any supported format.
///
/// ```
/// use ctxgc_core::{compile, Options};
/// let trace = r#"[
///   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
///   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20}
/// ]"#;
/// let out = compile(trace, &Options::default()).unwrap();
/// assert_eq!(out.output, "[receipt e1: superseded by e2]\n[e2] x = 20\n");
/// assert_eq!(out.receipts[0].id, "e1");
/// ```
pub fn compile(text: &str, options: &Options) -> Result<Compiled, Error> {
    let wire = match options.from {
        Some(forced) => forced.wire(),
        None if text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .starts_with('[') =>
        {
            // An array is detected and split in one read; an event trace is then lowered from
            // that split instead of being read again by its front-end (what `compile_with`
            // would do), which for a large trace is a tenth of the compile.
            let (detected, raw, validated) = detect_and_split_unchecked(text)?;
            let wire = detected.format.wire();
            match wire.lower_split(text, &raw, validated, options) {
                Some(lowered) => {
                    return compile_lowered(&mut lowered?, options).map(release_session);
                }
                None => wire,
            }
        }
        None => detect(text)?.format.wire(),
    };
    compile_with(wire, text, options)
}

/// Compiles `text` as `wire` lowers it, without detecting its format: each conversation is
/// lowered, compiled on a session the format configures, rendered and reported; the reports
/// of records (JSONL of conversations) are gathered in one.
///
/// ```
/// use ctxgc_core::{Format, Options, compile::compile_with};
/// let chat = r#"[{"role": "user", "content": "hi"}]"#;
/// let out = compile_with(Format::OpenaiChat.wire(), chat, &Options::default()).unwrap();
/// // A kept message keeps its exact bytes.
/// assert_eq!(out.output, chat);
/// ```
pub fn compile_with(
    wire: &dyn WireFormat,
    text: &str,
    options: &Options,
) -> Result<Compiled, Error> {
    wire.compilable()?;
    let conversations = wire.lower(text, options)?;
    if matches!(conversations.as_slice(), [only] if only.record.is_none()) {
        let mut only = conversations
            .into_iter()
            .next()
            .ok_or_else(no_conversation)?;
        return compile_lowered(&mut only, options).map(release_session);
    }
    let mut records = Vec::new();
    for mut lowered in conversations {
        let (compiled, _) = compile_lowered(&mut lowered, options)?;
        let (id, line) = lowered.record.unwrap_or_default();
        records.push(RecordCompiled { id, line, compiled });
    }
    Ok(gather(records, options))
}

/// Sessions of at least this many items are freed on a background thread.
const BACKGROUND_FREE_ITEMS: usize = 10_000;

/// The report of a compile whose session is no longer needed. Freeing a large session item by
/// item costs about a tenth of compiling it, and the caller has nothing to wait for: it is
/// freed on a thread of its own (here, if that thread cannot be started).
fn release_session((compiled, session): (Compiled, Session)) -> Compiled {
    if session.items().len() >= BACKGROUND_FREE_ITEMS {
        let _ = std::thread::Builder::new()
            .name("ctxgc-free".into())
            .spawn(move || drop(session));
    }
    compiled
}

fn no_conversation() -> Error {
    Error::UnknownFormat("the input holds no conversation".into())
}

/// Compiles one lowered conversation (its items move into the session) and reports it.
pub fn compile_lowered(
    lowered: &mut Lowered<'_>,
    options: &Options,
) -> Result<(Compiled, Session), Error> {
    let session = session_of(lowered, options)?;
    let compiled = lowered
        .doc
        .format
        .wire()
        .report(lowered, &session, options)?;
    Ok((compiled, session))
}

/// The compiled session of one lowered conversation (its items move into the session).
fn session_of(lowered: &mut Lowered<'_>, options: &Options) -> Result<Session, Error> {
    let mut session = lowered.doc.format.wire().session(options);
    session.extend(std::mem::take(&mut lowered.doc.items))?;
    session.compile();
    Ok(session)
}

/// One report for every record of a JSONL input: outputs one per line, counts summed, ids
/// `<record id>#<item id>`; `records` keeps each record's own report.
fn gather(compiled: Vec<RecordCompiled>, options: &Options) -> Compiled {
    let mut all = Compiled {
        format: compiled
            .first()
            .map_or(Format::OpenaiChat, |c| c.compiled.format),
        output: String::new(),
        tokens_before: 0,
        tokens_after: 0,
        would_save_tokens: 0,
        tokenizer: options.tokenizer.name(),
        decisions: Vec::new(),
        receipts: Vec::new(),
        warnings: Vec::new(),
        chat: None,
        records: Vec::new(),
    };
    for r in &compiled {
        let c = &r.compiled;
        all.output.push_str(&c.output);
        all.output.push('\n');
        all.tokens_before += c.tokens_before;
        all.tokens_after += c.tokens_after;
        all.would_save_tokens += c.would_save_tokens;
        all.decisions.extend(c.decisions.iter().map(|d| Decision {
            id: record_item_id(&r.id, &d.id),
            by: d.by.iter().map(|b| record_item_id(&r.id, b)).collect(),
            ..d.clone()
        }));
        all.receipts.extend(c.receipts.iter().map(|rc| Receipt {
            id: record_item_id(&r.id, &rc.id),
            by: rc.by.iter().map(|b| record_item_id(&r.id, b)).collect(),
            ..rc.clone()
        }));
        all.warnings.extend(c.warnings.iter().map(|w| Diagnostic {
            message: format!("record {:?}: {}", r.id, w.message),
            ..w.clone()
        }));
    }
    if options.detail == Detail::Full {
        all.records = compiled;
    }
    all
}

/// Builds the report of a compiled event session, with exact token counts.
pub fn report_events(session: &Session, tokenizer: Tokenizer) -> Compiled {
    report_events_counting(session, tokenizer, Counting::Exact)
}

/// [`report_events`], counting tokens only when `counting` asks for it.
pub fn report_events_counting(
    session: &Session,
    tokenizer: Tokenizer,
    counting: Counting,
) -> Compiled {
    report_events_with(session, tokenizer, counting, Detail::Full)
}

/// [`report_events_counting`] filling in `detail` (with [`Detail::OutputOnly`] no decisions,
/// receipts or counts).
pub fn report_events_with(
    session: &Session,
    tokenizer: Tokenizer,
    counting: Counting,
    detail: Detail,
) -> Compiled {
    let plans = session.plans();
    let rendered = prompt::render_planned(session, &plans);
    let counting = detail.counting(counting);
    let tokens_before = counting.count(|| tokenizer.count(&uncompacted_events(session)));
    let tokens_after = counting.count(|| tokenizer.count(&rendered.text));
    let (decisions, receipts) = match detail {
        Detail::Full => {
            let decisions = session.decisions_of(&plans);
            let receipts = receipts_for(session.items(), &decisions);
            (decisions, receipts)
        }
        Detail::OutputOnly => (Vec::new(), Vec::new()),
    };
    Compiled {
        format: Format::Events,
        tokens_before,
        tokens_after,
        would_save_tokens: session.would_save_tokens_of(&plans),
        output: rendered.text,
        tokenizer: tokenizer.name(),
        decisions,
        receipts,
        warnings: session.warnings().to_vec(),
        chat: None,
        records: Vec::new(),
    }
}

/// Receipts for every retired or rewritten item.
pub fn receipts_for(items: &[Item], decisions: &[Decision]) -> Vec<Receipt> {
    items
        .iter()
        .zip(decisions)
        .filter(|(_, d)| d.action != Action::Keep)
        .filter_map(|(item, d)| {
            Some(Receipt {
                id: d.id.clone(),
                action: d.action,
                reason: d.reason?,
                by: d.by.clone(),
                hash: blake3::hash(item.raw.as_bytes()).to_hex().to_string(),
                bytes: item.raw.len(),
            })
        })
        .collect()
}

/// The original bytes of the item with `id`, and what was decided for it.
///
/// ```
/// use ctxgc_core::{receipt, Options};
/// let trace = "{\"id\":\"e1\",\"type\":\"set_var\",\"timestamp\":1,\"key\":\"x\",\"value\":1}\n\
///              {\"id\":\"e2\",\"type\":\"set_var\",\"timestamp\":2,\"key\":\"x\",\"value\":2}";
/// let (raw, decision) = receipt(trace, &Options::default(), "e1").unwrap();
/// assert_eq!(raw, r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#);
/// assert_eq!(decision.reason.unwrap().code(), "superseded-var");
/// ```
pub fn receipt(text: &str, options: &Options, id: &str) -> Result<(String, Decision), Error> {
    let wire = input_format(text, options)?.wire();
    wire.compilable()?;
    let conversations = wire.lower(text, options)?;
    let records = conversations.first().is_none_or(|c| c.record.is_some());
    let (mut lowered, item_id) = if records {
        let (record, item) = id.rsplit_once('#').ok_or_else(|| {
            Error::Usage(format!(
                "{id:?}: in a JSONL of records an item is named `<record id>#<item id>`"
            ))
        })?;
        let lowered = conversations
            .into_iter()
            .find(|c| c.record.as_ref().is_some_and(|(r, _)| r == record))
            .ok_or_else(|| Error::Usage(format!("no record with id {record:?} in the input")))?;
        (lowered, item.to_owned())
    } else {
        let lowered = conversations
            .into_iter()
            .next()
            .ok_or_else(no_conversation)?;
        (lowered, id.to_owned())
    };
    let session = session_of(&mut lowered, options)?;
    let i = session
        .position(&item_id)
        .ok_or_else(|| Error::Usage(format!("no item with id {item_id:?} in the input")))?;
    Ok((session.items()[i].raw.clone(), session.decision(i)))
}

/// The originals of every retired or rewritten item, by id (records: `<record id>#<item
/// id>`), from one compile: what a receipt store is filled with.
pub fn originals(text: &str, options: &Options) -> Result<Vec<(String, String)>, Error> {
    let wire = input_format(text, options)?.wire();
    wire.compilable()?;
    let mut out = Vec::new();
    for mut lowered in wire.lower(text, options)? {
        let session = session_of(&mut lowered, options)?;
        for (i, item) in session.items().iter().enumerate() {
            if session.plan_of(i).action() != Action::Keep {
                let id = match &lowered.record {
                    Some((r, _)) => record_item_id(r, &item.id),
                    None => item.id.clone(),
                };
                out.push((id, item.raw.clone()));
            }
        }
    }
    Ok(out)
}

/// The input rendered without compaction, and the compiled output, for diffing: event lines
/// for a trace, one `### id role` header per message then its text for a chat.
pub fn before_after(text: &str, options: &Options) -> Result<(String, String), Error> {
    let wire = input_format(text, options)?.wire();
    wire.compilable()?;
    let mut before = String::new();
    let mut after = String::new();
    for mut lowered in wire.lower(text, options)? {
        let session = session_of(&mut lowered, options)?;
        let prefix = match &lowered.record {
            Some((id, _)) => format!("{id}#"),
            None => String::new(),
        };
        let (b, a) = lowered
            .doc
            .format
            .wire()
            .before_after(&lowered, &session, options, &prefix)?;
        before.push_str(&b);
        after.push_str(&a);
    }
    Ok((before, after))
}

/// An event session's items as given, one line each in render order: what the compiled
/// prompt is measured and diffed against.
pub fn uncompacted_events(session: &Session) -> String {
    session
        .render_order()
        .into_iter()
        .map(|i| &session.items()[i])
        .filter(|item| !matches!(item.kind, crate::ir::Kind::EdgeInjection { .. }))
        .map(prompt::event_line)
        .collect()
}
